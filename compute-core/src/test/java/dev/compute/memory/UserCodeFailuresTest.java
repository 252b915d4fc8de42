package dev.compute.memory;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.resource.BackendResource;
import dev.compute.memory.resource.Block;
import dev.compute.memory.resource.PoolSettings;
import dev.compute.memory.resource.pool.CachingPoolResource;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import dev.compute.memory.testing.ForwardingResource;
import dev.compute.memory.testing.ManagerInvariants;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The application's code the manager calls (listeners, out-of-memory handlers, resource adaptors) throwing an
 * {@link Error}, as JUnit's {@code fail()} and {@code assert} do: the call that met it fails or goes on, and nothing is
 * left behind (no waiter that never completes, no queue that stops, no call counted for ever). Every wait is bounded.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class UserCodeFailuresTest {

    private static final long MiB = 1L << 20;
    private static final long BLOCK = 16 * MiB;
    private static final Duration LONG = Duration.ofSeconds(20);
    private static final MemoryLocation DEVICE = MemoryLocation.DEVICE;

    private static UnifiedMemoryManagerBuilder fourBlocks() {
        return UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend()).maxPoolSize(4 * BLOCK)
                .timelineInterval(Duration.ZERO).trimInterval(Duration.ZERO);
    }

    private static List<UnifiedBuffer> fill(UnifiedMemoryManager manager) {
        List<UnifiedBuffer> held = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            held.add(manager.allocate(BLOCK, DEVICE));
        }
        return held;
    }

    private static Throwable failureOf(CompletableFuture<?> future) throws Exception {
        try {
            future.get(LONG.toSeconds(), TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            return e.getCause();
        }
        throw new AssertionError("the future completed normally");
    }

    @Test
    void aListenerThatThrowsAnErrorAsARequestTimesOutStillFailsItsFuture() throws Exception {
        MemoryEventListener failing = new MemoryEventListener() {
            @Override
            public void allocationFailed(MemoryLocation location, long requestedBytes, OutOfMemoryReason reason) {
                throw new AssertionError("a test's listener fails");
            }
        };
        UnifiedMemoryManager manager = fourBlocks().eventListener(failing).build();
        List<UnifiedBuffer> held = fill(manager);

        assertThat(failureOf(manager.allocateAsync(BLOCK, DEVICE, Duration.ofMillis(100))))
                .isInstanceOf(DeviceOutOfMemoryException.class).hasMessageContaining("within the wait of 100 ms");

        CompletableFuture<UnifiedBuffer> served = manager.allocateAsync(BLOCK, DEVICE, LONG);
        held.removeFirst().close();
        served.get(LONG.toSeconds(), TimeUnit.SECONDS).close();

        CompletableFuture<UnifiedBuffer> waiting = manager.allocateAsync(2 * BLOCK, DEVICE, LONG);
        manager.close();
        assertThat(failureOf(waiting)).isInstanceOf(IllegalStateException.class).hasMessageContaining("closed");
    }

    @Test
    void aListenerThatThrowsAnErrorOnEveryBackendCallLeavesThePoolWhole() {
        MemoryEventListener failing = new MemoryEventListener() {
            @Override
            public void backendAllocated(MemoryLocation location, long bytes, long nanos) {
                throw new AssertionError("allocated");
            }

            @Override
            public void backendFreed(MemoryLocation location, long bytes, long nanos) {
                throw new AssertionError("freed");
            }

            @Override
            public void trimmed(MemoryLocation location, long releasedBytes) {
                throw new OutOfMemoryError("trimmed");
            }
        };
        try (UnifiedMemoryManager manager = fourBlocks().eventListener(failing).build()) {
            List<UnifiedBuffer> held = fill(manager);
            ManagerInvariants.checkQuiescent(manager);
            held.forEach(UnifiedBuffer::close);
            assertThat(manager.releaseCachedMemory()).isEqualTo(4 * BLOCK);
            ManagerInvariants.checkQuiescent(manager);
            assertThat(manager.statistics(DEVICE).reservedBytes()).isZero();
            fill(manager).forEach(UnifiedBuffer::close);
            assertThat(manager.statistics(DEVICE).backendAllocations()).isEqualTo(8);
        }
    }

    @Test
    void anOutOfMemoryHandlerThatThrowsAnErrorOnTheWaiterThreadFailsOnlyThatRequest() throws Exception {
        AtomicBoolean thrown = new AtomicBoolean();
        OutOfMemoryHandler failingOnce = (location, bytes, attempt, failure) -> {
            if (Thread.currentThread().getName().startsWith("compute-memory-waiters") && thrown.compareAndSet(false, true)) {
                throw new AssertionError("a handler fails on the waiter thread");
            }
            return false;
        };
        try (UnifiedMemoryManager manager = fourBlocks().outOfMemoryHandler(failingOnce).build()) {
            List<UnifiedBuffer> held = fill(manager);
            CompletableFuture<UnifiedBuffer> large = manager.allocateAsync(2 * BLOCK, DEVICE, LONG);
            CompletableFuture<UnifiedBuffer> behind = manager.allocateAsync(BLOCK, DEVICE, LONG);

            held.removeFirst().close(); // room for one block: the large head is tried on the waiter thread, and its handler throws

            assertThat(failureOf(large)).isInstanceOf(AssertionError.class).hasMessage("a handler fails on the waiter thread");
            UnifiedBuffer served = behind.get(LONG.toSeconds(), TimeUnit.SECONDS);
            CompletableFuture<UnifiedBuffer> later = manager.allocateAsync(BLOCK, DEVICE, LONG);
            assertThat(later).isNotDone();
            held.removeFirst().close();
            later.get(LONG.toSeconds(), TimeUnit.SECONDS).close();
            served.close();
            assertThat(manager.statistics(DEVICE).waitingRequests()).isZero();
            held.forEach(UnifiedBuffer::close);
        }
    }

    /**
     * The same handler failing on the first attempt, which runs on the caller's thread: the exception came out of
     * {@code allocateAsync} itself (whose contract throws only for bad arguments and a closed manager), so a caller that
     * handles failures through the future, as it must on the waiter thread, met it only in its own stack.
     */
    @Test
    void anOutOfMemoryHandlerThatThrowsOnTheFirstAttemptFailsTheFutureNotTheCall() throws Exception {
        OutOfMemoryHandler failing = (location, bytes, attempt, failure) -> {
            throw new IllegalStateException("a handler fails");
        };
        try (UnifiedMemoryManager manager = fourBlocks().outOfMemoryHandler(failing).build()) {
            List<UnifiedBuffer> held = fill(manager);

            CompletableFuture<UnifiedBuffer> request = manager.allocateAsync(BLOCK, DEVICE, LONG);

            assertThat(failureOf(request)).isInstanceOf(IllegalStateException.class).hasMessage("a handler fails");
            assertThat(manager.statistics(DEVICE).waitingRequests()).isZero();
            held.forEach(UnifiedBuffer::close);
            manager.allocateAsync(BLOCK, DEVICE, LONG).get(LONG.toSeconds(), TimeUnit.SECONDS).close();
        }
    }

    /** The same with a checked exception (a Kotlin handler, Lombok's {@code @SneakyThrows}): it too is the future's. */
    @Test
    void anOutOfMemoryHandlerThatThrowsACheckedExceptionOnTheFirstAttemptFailsTheFutureNotTheCall() throws Exception {
        OutOfMemoryHandler failing = (location, bytes, attempt, failure) -> {
            throw UserCodeFailuresTest.<RuntimeException>sneak(new java.io.IOException("a handler fails"));
        };
        try (UnifiedMemoryManager manager = fourBlocks().outOfMemoryHandler(failing).build()) {
            List<UnifiedBuffer> held = fill(manager);

            CompletableFuture<UnifiedBuffer> request = manager.allocateAsync(BLOCK, DEVICE, LONG);

            assertThat(failureOf(request)).isInstanceOf(java.io.IOException.class).hasMessage("a handler fails");
            held.forEach(UnifiedBuffer::close);
        }
    }

    @SuppressWarnings("unchecked")
    private static <T extends Throwable> T sneak(Throwable checked) throws T {
        throw (T) checked; // what Kotlin, Groovy or Lombok's @SneakyThrows code throws where Java would not compile it
    }

    @Test
    void anAdaptorWhoseFreeThrowsAnErrorStillWakesTheWaitersAndLeavesNoCallCounted() throws Exception {
        AtomicInteger frees = new AtomicInteger();
        UnifiedMemoryManager manager = fourBlocks().closeTimeout(Duration.ofSeconds(30))
                .resourceAdaptor((upstream, location) -> new ForwardingResource(upstream) {
                    @Override
                    public void deallocate(Block block, CompletableFuture<?> inFlight) {
                        upstream.deallocate(block, inFlight);
                        if (frees.incrementAndGet() == 1) {
                            throw new AssertionError("the adaptor's free fails after giving the block back");
                        }
                    }
                }).build();
        List<UnifiedBuffer> held = fill(manager);
        CompletableFuture<UnifiedBuffer> waiting = manager.allocateAsync(BLOCK, DEVICE, LONG);

        assertThatThrownBy(held.removeFirst()::close).isInstanceOf(AssertionError.class);

        waiting.get(LONG.toSeconds(), TimeUnit.SECONDS).close();
        held.forEach(UnifiedBuffer::close);
        long start = System.nanoTime();
        manager.close();
        assertThat(Duration.ofNanos(System.nanoTime() - start)).as("no call left counted for the close to wait out")
                .isLessThan(Duration.ofSeconds(10));
        assertThat(manager.statistics(DEVICE).reservedBytes()).as("the pools were freed, not kept").isZero();
    }

    @Test
    void aListenerGivenToAResourceOfOnesOwnIsGuardedToo() {
        MemoryEventListener failing = new MemoryEventListener() {
            @Override
            public void backendAllocated(MemoryLocation location, long bytes, long nanos) {
                throw new AssertionError("allocated");
            }
        };
        SimulatedDiscreteBackend backend = new SimulatedDiscreteBackend();
        BackendResource upstream = new BackendResource(backend, DEVICE, 4 * BLOCK, "max-pool-size", LONG, failing);
        try (CachingPoolResource pool = new CachingPoolResource(upstream, PoolSettings.plainSegments(), failing)) {
            Block block = pool.allocate(BLOCK);
            pool.deallocate(block);
            assertThat(pool.reservedBytes()).isEqualTo(upstream.reservedBytes()).isPositive();
            assertThat(pool.allocate(BLOCK)).as("served from the cache the failed listener did not spoil").isNotNull();
        }
        backend.close();
    }
}
