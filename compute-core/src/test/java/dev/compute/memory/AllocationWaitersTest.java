package dev.compute.memory;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.resource.LimitingResource;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import java.lang.ref.WeakReference;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Queue;
import java.util.Set;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Waiting for memory ({@code allocateAsync}) and trying for it ({@code tryAllocate}) on the simulated device: a cap
 * of four 16 MiB blocks (plain segments of exactly that size), held full, then freed by other threads. Every wait is
 * bounded: a future is awaited at most {@link #LONG} and each test has a timeout of its own.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class AllocationWaitersTest {

    private static final long MiB = 1L << 20;
    private static final long BLOCK = 16 * MiB;
    private static final Duration LONG = Duration.ofSeconds(20);
    private static final MemoryLocation DEVICE = MemoryLocation.DEVICE;

    private final AtomicInteger failuresTold = new AtomicInteger();
    private final UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend())
            .maxPoolSize(4 * BLOCK).timelineInterval(Duration.ZERO)
            .eventListener(new MemoryEventListener() {
                @Override
                public void allocationFailed(MemoryLocation location, long bytes, OutOfMemoryReason reason) {
                    failuresTold.incrementAndGet();
                }
            })
            .build();
    private final List<UnifiedBuffer> held = new ArrayList<>();

    @AfterEach
    void close() {
        held.forEach(UnifiedBuffer::close);
        manager.close();
    }

    private void fill() {
        for (int i = 0; i < 4; i++) {
            held.add(manager.allocate(BLOCK, DEVICE));
        }
    }

    private static UnifiedBuffer await(CompletableFuture<UnifiedBuffer> future) throws Exception {
        return future.get(LONG.toSeconds(), TimeUnit.SECONDS);
    }

    @Test
    void completesAtOnceWhenThereIsMemory() {
        CompletableFuture<UnifiedBuffer> future = manager.allocateAsync(DataType.FLOAT32, 1024, DEVICE, LONG);

        assertThat(future).isCompletedWithValueMatching(buffer -> buffer.byteSize() == 4096);
        future.join().close();
        assertThat(manager.statistics(DEVICE).waits()).isZero();
    }

    @Test
    void aFreeOnAnotherThreadCompletesAWaiter() throws Exception {
        fill();
        CompletableFuture<UnifiedBuffer> future = manager.allocateAsync(BLOCK, DEVICE, LONG);
        assertThat(future).isNotDone();
        assertThat(manager.statistics(DEVICE).waitingRequests()).isEqualTo(1);

        Thread.ofPlatform().start(held.removeFirst()::close).join();

        try (UnifiedBuffer buffer = await(future)) {
            assertThat(buffer.byteSize()).isEqualTo(BLOCK);
        }
        MemoryStatistics figures = manager.statistics(DEVICE);
        assertThat(figures.waitingRequests()).isZero();
        assertThat(figures.waits()).isEqualTo(1);
        assertThat(figures.waitTimeouts()).isZero();
        assertThat(failuresTold).as("a retry that failed is not the request's failure").hasValue(0);
    }

    @Test
    void waitersAreServedInOrderAndALaterSmallOneDoesNotPassAnEarlierLargeOne() throws Exception {
        fill();
        CompletableFuture<UnifiedBuffer> large = manager.allocateAsync(2 * BLOCK, DEVICE, LONG);
        CompletableFuture<UnifiedBuffer> small = manager.allocateAsync(BLOCK, DEVICE, LONG);

        held.removeFirst().close(); // room for the small one only: it must leave it to the large one
        held.removeFirst().close(); // now the large one fits; had the small one passed, it never would

        UnifiedBuffer first = await(large);
        held.add(first);
        assertThat(small).as("the pool is full again").isNotDone();
        held.removeFirst().close();
        held.add(await(small));
        assertThat(manager.statistics(DEVICE).waits()).isEqualTo(2);
    }

    @Test
    void aTimeoutFailsWithTheLastRefusalAndItsReason() {
        fill();
        CompletableFuture<UnifiedBuffer> future = manager.allocateAsync(BLOCK, DEVICE, Duration.ofMillis(200));

        assertThatThrownBy(() -> await(future)).isInstanceOf(ExecutionException.class).cause()
                .isInstanceOfSatisfying(DeviceOutOfMemoryException.class, e -> {
                    assertThat(e.reason()).isEqualTo(OutOfMemoryReason.POOL_LIMIT);
                    assertThat(e.requestedBytes()).isEqualTo(BLOCK);
                    assertThat(e).hasMessageContaining("within the wait of 200 ms")
                            .hasMessageContaining("compute.memory.pooling.max-pool-size").hasMessageContaining("bytes live");
                    assertThat(e.getCause()).isInstanceOf(DeviceOutOfMemoryException.class);
                });
        MemoryStatistics figures = manager.statistics(DEVICE);
        assertThat(figures.waitTimeouts()).isEqualTo(1);
        assertThat(figures.waitingRequests()).isZero();
        assertThat(failuresTold).as("told once, when it gave up").hasValue(1);
    }

    @Test
    void oneWaitingBehindAnotherTimesOutWithTheRefusalAheadOfIt() {
        fill();
        CompletableFuture<UnifiedBuffer> ahead = manager.allocateAsync(BLOCK, DEVICE, LONG);
        CompletableFuture<UnifiedBuffer> behind = manager.allocateAsync(MiB, DEVICE, Duration.ofMillis(100));

        assertThatThrownBy(() -> await(behind)).cause().isInstanceOf(DeviceOutOfMemoryException.class)
                .hasMessageContaining("behind earlier requests").hasMessageContaining("requested " + BLOCK + " bytes");
        assertThat(ahead).isNotDone();
        ahead.cancel(true);
    }

    @Test
    void aRequestAboveTheCapOrWithNoTimeFailsAtOnce() {
        assertThat(manager.allocateAsync(5 * BLOCK, DEVICE, LONG)).isCompletedExceptionally();
        fill();
        CompletableFuture<UnifiedBuffer> now = manager.allocateAsync(BLOCK, DEVICE, Duration.ZERO);

        assertThat(now).isCompletedExceptionally();
        assertThatThrownBy(now::join).cause().isInstanceOf(DeviceOutOfMemoryException.class);
        assertThat(manager.statistics(DEVICE).waits()).isZero();
        assertThat(failuresTold).hasValue(2);
    }

    @Test
    void aRequestAboveALimitComposedIntoTheChainFailsAtOnce() {
        try (UnifiedMemoryManager limited = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend())
                .maxPoolSize(4 * BLOCK).timelineInterval(Duration.ZERO)
                .resourceAdaptor((upstream, location) -> new LimitingResource(upstream, location, 2 * BLOCK, "a tenant's budget"))
                .build()) {
            CompletableFuture<UnifiedBuffer> above = limited.allocateAsync(3 * BLOCK, DEVICE, LONG);

            assertThat(above).as("no free can make room for it: it does not wait").isCompletedExceptionally();
            assertThatThrownBy(above::join).cause().isInstanceOf(AllocationAboveLimitException.class).hasMessageContaining("a tenant's budget");
            assertThat(limited.statistics(DEVICE).waits()).isZero();
        }
    }

    @Test
    void aRequestAboveALimitThatReachesTheHeadOfTheQueueFailsThereAndHoldsUpNoOneBehindIt() throws Exception {
        try (UnifiedMemoryManager limited = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend())
                .maxPoolSize(4 * BLOCK).timelineInterval(Duration.ZERO)
                .resourceAdaptor((upstream, location) -> new LimitingResource(upstream, location, 2 * BLOCK, "a tenant's budget"))
                .build()) {
            UnifiedBuffer first = limited.allocate(BLOCK, DEVICE);
            UnifiedBuffer second = limited.allocate(BLOCK, DEVICE);
            CompletableFuture<UnifiedBuffer> waiting = limited.allocateAsync(BLOCK, DEVICE, LONG);
            CompletableFuture<UnifiedBuffer> above = limited.allocateAsync(3 * BLOCK, DEVICE, LONG); // queued behind, untried
            CompletableFuture<UnifiedBuffer> behind = limited.allocateAsync(BLOCK, DEVICE, LONG);
            assertThat(above).isNotDone();

            first.close();
            UnifiedBuffer served = await(waiting);
            assertThatThrownBy(() -> await(above)).cause().isInstanceOf(AllocationAboveLimitException.class);
            second.close();
            try (UnifiedBuffer next = await(behind)) {
                assertThat(next.byteSize()).isEqualTo(BLOCK);
            }
            served.close();
        }
    }

    @Test
    void aCancelledRequestLeavesTheQueueAndTheNextIsServed() throws Exception {
        fill();
        CompletableFuture<UnifiedBuffer> cancelled = manager.allocateAsync(BLOCK, DEVICE, LONG);
        CompletableFuture<UnifiedBuffer> next = manager.allocateAsync(BLOCK, DEVICE, LONG);

        assertThat(cancelled.cancel(true)).isTrue();
        assertThat(manager.statistics(DEVICE).waitingRequests()).isEqualTo(1);
        held.removeFirst().close();

        held.add(await(next));
        assertThatThrownBy(cancelled::join).isInstanceOf(CancellationException.class);
        assertThat(manager.statistics(DEVICE).waitingRequests()).isZero();
        assertThat(manager.statistics(DEVICE).liveBuffers()).as("nothing made for the cancelled request").isEqualTo(4);
    }

    /**
     * A request its caller ends, cancelling it or letting {@code orTimeout} fail it, is off the queue when the
     * functions added to its future run, as one that the manager serves, times out or fails at its close: they read no
     * figure that still counts it as waiting.
     */
    @Test
    void aRequestItsCallerEndsIsNotCountedAsWaitingByItsFunctions() throws Exception {
        fill();
        CompletableFuture<UnifiedBuffer> cancelled = manager.allocateAsync(BLOCK, DEVICE, LONG);
        CompletableFuture<UnifiedBuffer> timedOutByItsCaller = manager.allocateAsync(BLOCK, DEVICE, LONG);
        CompletableFuture<Long> waitingWhenCancelled = cancelled.handle((buffer, failure) -> manager.statistics(DEVICE).waitingRequests());

        cancelled.cancel(false);

        assertThat(waitingWhenCancelled.get(LONG.toSeconds(), TimeUnit.SECONDS)).as("the other request waits on").isEqualTo(1);
        // its timeout set only now: set before the cancel, it could fire first on a slow machine, the other then not waiting
        CompletableFuture<Long> waitingWhenTimedOut = timedOutByItsCaller.orTimeout(10, TimeUnit.MILLISECONDS)
                .handle((buffer, failure) -> manager.statistics(DEVICE).waitingRequests());
        assertThat(waitingWhenTimedOut.get(LONG.toSeconds(), TimeUnit.SECONDS)).isZero();
        held.removeFirst().close();
        assertThat(manager.statistics(DEVICE).liveBuffers()).as("nothing made for either").isEqualTo(3);
    }

    @Test
    void closingTheManagerFailsEveryWaiterAtOnce() {
        fill();
        List<CompletableFuture<UnifiedBuffer>> waiting = List.of(manager.allocateAsync(BLOCK, DEVICE, LONG),
                manager.allocateAsync(BLOCK, DEVICE, Duration.ofDays(365)));

        manager.close();

        for (CompletableFuture<UnifiedBuffer> future : waiting) {
            assertThatThrownBy(() -> future.get(5, TimeUnit.SECONDS)).cause()
                    .isInstanceOf(IllegalStateException.class).hasMessageContaining("closed");
        }
        assertThatThrownBy(() -> manager.allocateAsync(BLOCK, DEVICE, LONG)).isInstanceOf(IllegalStateException.class);
    }

    @Test
    void manyThreadsTakingTurnsLoseNoWakeUp() throws Exception {
        int threads = 8;
        int rounds = 60;
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        try {
            List<Future<?>> runs = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                runs.add(pool.submit(() -> {
                    for (int i = 0; i < rounds; i++) {
                        try (UnifiedBuffer buffer = await(manager.allocateAsync(BLOCK, DEVICE, LONG))) {
                            buffer.copyFrom(new byte[] {(byte) i});
                        }
                    }
                    return null;
                }));
            }
            for (Future<?> run : runs) {
                run.get(50, TimeUnit.SECONDS);
            }
        } finally {
            pool.shutdownNow();
        }
        MemoryStatistics figures = manager.statistics(DEVICE);
        assertThat(figures.waitTimeouts()).isZero();
        assertThat(figures.waitingRequests()).isZero();
        assertThat(figures.liveBuffers()).isZero();
        assertThat(figures.allocations()).isEqualTo((long) threads * rounds);
    }

    @Test
    void aRequestServedAsItJoinsTheQueueLeavesNoTimeoutPendingBehindIt() throws Exception {
        // threads taking turns, each request waiting a year at most: one the waiter thread serves between its joining
        // the queue and its timeout being set must not leave that timeout pending, holding it and its buffer for the year
        int threads = 8;
        int rounds = 4000;
        Queue<WeakReference<UnifiedBuffer>> served = new ConcurrentLinkedQueue<>();
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        try {
            List<Future<?>> runs = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                runs.add(pool.submit(() -> {
                    for (int i = 0; i < rounds; i++) {
                        UnifiedBuffer buffer = await(manager.allocateAsync(BLOCK, DEVICE, Duration.ofDays(365)));
                        served.add(new WeakReference<>(buffer));
                        buffer.close();
                    }
                    return null;
                }));
            }
            for (Future<?> run : runs) {
                run.get(50, TimeUnit.SECONDS);
            }
        } finally {
            pool.shutdownNow();
        }
        long kept = served.size();
        for (int i = 0; i < 50 && kept > 0; i++) {
            System.gc();
            Thread.sleep(20);
            kept = served.stream().filter(buffer -> buffer.get() != null).count();
        }
        assertThat(kept).as("closed buffers of requests that ended, still reachable").isZero();
        assertThat(manager.statistics(DEVICE).waitingRequests()).isZero();
    }

    /**
     * A batch takes its first buffer, finds no memory for its second and, all or none, gives the first back. Meanwhile
     * a close woke the waiting request, which found the batch's first buffer taken: the memory the batch gave back is
     * what it waits for, and no close comes after. The out-of-memory handler sets the scene: asked for the batch's
     * second buffer, it closes a buffer and waits until the waiter thread has tried the request in vain.
     */
    @Test
    void memoryAFailedBatchGivesBackWakesTheRequestWaitingForIt() throws Exception {
        Thread batchThread = Thread.currentThread();
        AtomicReference<UnifiedBuffer> closedInTheBatch = new AtomicReference<>();
        AtomicReference<CountDownLatch> triedInVain = new AtomicReference<>(new CountDownLatch(1));
        UnifiedMemoryManager withHandler = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend())
                .maxPoolSize(4 * BLOCK).timelineInterval(Duration.ZERO)
                .outOfMemoryHandler((location, bytes, attempt, failure) -> {
                    if (Thread.currentThread() != batchThread) {
                        triedInVain.get().countDown(); // the waiter thread's retry of the waiting request
                        return false;
                    }
                    UnifiedBuffer other = closedInTheBatch.getAndSet(null);
                    if (other != null) {
                        CountDownLatch retried = new CountDownLatch(1);
                        triedInVain.set(retried);
                        other.close();
                        awaitQuietly(retried);
                    }
                    return false;
                })
                .build();
        try (withHandler) {
            List<UnifiedBuffer> full = new ArrayList<>();
            for (int i = 0; i < 4; i++) {
                full.add(withHandler.allocate(BLOCK, DEVICE));
            }
            CompletableFuture<UnifiedBuffer> waiting = withHandler.allocateAsync(2 * BLOCK, DEVICE, LONG);
            full.removeLast().close();
            awaitQuietly(triedInVain.get());
            closedInTheBatch.set(full.removeLast());

            assertThatThrownBy(() -> withHandler.allocateBatch(DataType.INT8, new long[] {BLOCK, 2 * BLOCK}, DEVICE))
                    .isInstanceOf(DeviceOutOfMemoryException.class).hasMessageContaining("given back");

            try (UnifiedBuffer served = await(waiting)) {
                assertThat(served.byteSize()).isEqualTo(2 * BLOCK);
            }
            full.forEach(UnifiedBuffer::close);
        }
    }

    /**
     * A buffer closed while device work on it is in flight gives its memory back when the work ends; a request that
     * queued after the close (when nobody waited yet), its attempt having waited the device wait timeout for that work
     * in vain, is served then, not at the next close or its own timeout.
     */
    @Test
    void theEndOfDeviceWorkOnAClosedBufferServesARequestThatQueuedAfterTheClose() throws Exception {
        try (FullPool pool = FullPool.withAKernelOnAClosedBuffer(Duration.ofMillis(50))) {
            CompletableFuture<UnifiedBuffer> waiting = pool.manager().allocateAsync(BLOCK, DEVICE, LONG);
            assertThat(waiting).as("the memory is held by the kernel").isNotDone();

            pool.kernel().complete(null);

            try (UnifiedBuffer served = await(waiting)) {
                assertThat(served.byteSize()).isEqualTo(BLOCK);
            }
        }
    }

    /**
     * An asynchronous request returns at once though its memory is held by device work on a closed buffer: its first
     * attempt, on the caller's thread, waits for no device work (the device wait timeout here is far past the test's);
     * the waiter thread serves it when the work ends.
     */
    @Test
    void theCallerOfAllocateAsyncDoesNotWaitForDeviceWorkOnFreedMemory() throws Exception {
        try (FullPool pool = FullPool.withAKernelOnAClosedBuffer(Duration.ofMinutes(10))) {
            CompletableFuture<CompletableFuture<UnifiedBuffer>> asking = new CompletableFuture<>();
            Thread.ofPlatform().daemon().start(() -> asking.complete(pool.manager().allocateAsync(BLOCK, DEVICE, LONG)));
            CompletableFuture<UnifiedBuffer> waiting;
            try {
                waiting = asking.get(LONG.toSeconds(), TimeUnit.SECONDS);
            } finally {
                pool.kernel().complete(null); // else a caller still waiting would hold the manager's close for the device wait
            }
            try (UnifiedBuffer served = await(waiting)) {
                assertThat(served.byteSize()).isEqualTo(BLOCK);
            }
        }
    }

    /** The out-of-memory handlers an asynchronous request asks run on the waiter thread, never holding up its caller. */
    @Test
    void anAsynchronousRequestAsksTheOutOfMemoryHandlersOffItsCallersThread() throws Exception {
        Set<Thread> askedOn = ConcurrentHashMap.newKeySet();
        List<UnifiedBuffer> full = new ArrayList<>();
        try (UnifiedMemoryManager handled = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend())
                .maxPoolSize(4 * BLOCK).timelineInterval(Duration.ZERO).trimInterval(Duration.ZERO)
                .outOfMemoryHandler((location, bytes, attempt, failure) -> {
                    askedOn.add(Thread.currentThread());
                    if (full.isEmpty()) {
                        return false;
                    }
                    full.removeFirst().close(); // frees what the request needs: retry
                    return true;
                }).build()) {
            for (int i = 0; i < 4; i++) {
                full.add(handled.allocate(BLOCK, DEVICE));
            }
            try (UnifiedBuffer served = await(handled.allocateAsync(BLOCK, DEVICE, LONG))) {
                assertThat(served.byteSize()).isEqualTo(BLOCK);
            }
            assertThat(askedOn).as("the handler ran for the request, on the waiter thread").isNotEmpty().doesNotContain(Thread.currentThread());
            full.forEach(UnifiedBuffer::close);
        }
    }

    /**
     * Whenever it is read, a location's wait figures add up: no fewer than zero requests waiting, and those waiting and
     * those that timed out never more than those that ever waited, however requests join, are served and time out.
     */
    @Test
    void theWaitFiguresAddUpWheneverTheyAreRead() throws Exception {
        for (int i = 0; i < 3; i++) {
            held.add(manager.allocate(BLOCK, DEVICE)); // one block left, taken in turn
        }
        AtomicReference<String> impossible = new AtomicReference<>();
        AtomicInteger readings = new AtomicInteger();
        CountDownLatch done = new CountDownLatch(3);
        Thread reader = Thread.ofPlatform().daemon().start(() -> {
            while (done.getCount() > 0 && impossible.get() == null) {
                MemoryStatistics figures = manager.statistics(DEVICE);
                long waiting = figures.waitingRequests();
                if (waiting < 0 || waiting + figures.waitTimeouts() > figures.waits()) {
                    impossible.set(waiting + " waiting and " + figures.waitTimeouts() + " timed out of " + figures.waits() + " waits");
                }
                readings.incrementAndGet();
            }
        });
        for (int t = 0; t < 3; t++) {
            Duration timeout = t == 0 ? Duration.ofNanos(1) : LONG; // one times out at once, again and again
            Thread.ofPlatform().daemon().start(() -> {
                try {
                    for (int i = 0; i < 3_000 && impossible.get() == null; i++) {
                        try (UnifiedBuffer buffer = manager.allocateAsync(BLOCK, DEVICE, timeout).get(LONG.toSeconds(), TimeUnit.SECONDS)) {
                            assertThat(buffer.byteSize()).isEqualTo(BLOCK);
                        } catch (ExecutionException timedOut) {
                            assertThat(timedOut).hasCauseInstanceOf(DeviceOutOfMemoryException.class);
                        }
                    }
                } catch (Exception e) {
                    impossible.compareAndSet(null, e.toString());
                } finally {
                    done.countDown();
                }
            });
        }
        awaitQuietly(done);
        reader.join(LONG.toMillis());

        assertThat(impossible).as("after %d readings", readings.get()).hasValue(null);
    }

    /**
     * A pool of four blocks, every one taken, one of them closed while {@code kernel} still writes it, so that its memory
     * waits on that work (the device wait timeout {@code deviceWait}); closing it closes the others, then the manager.
     */
    private record FullPool(UnifiedMemoryManager manager, List<UnifiedBuffer> open, CompletableFuture<Void> kernel) implements AutoCloseable {

        static FullPool withAKernelOnAClosedBuffer(Duration deviceWait) {
            UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend())
                    .maxPoolSize(4 * BLOCK).timelineInterval(Duration.ZERO).trimInterval(Duration.ZERO).deviceWaitTimeout(deviceWait).build();
            List<UnifiedBuffer> open = new ArrayList<>();
            for (int i = 0; i < 4; i++) {
                open.add(manager.allocate(BLOCK, DEVICE));
            }
            CompletableFuture<Void> kernel = new CompletableFuture<>();
            UnifiedBuffer working = open.removeFirst();
            try (BufferAccess access = working.deviceAccess(AccessMode.WRITE)) {
                access.inFlightUntil(kernel);
            }
            working.close();
            return new FullPool(manager, open, kernel);
        }

        @Override
        public void close() {
            open.forEach(UnifiedBuffer::close);
            manager.close();
        }
    }

    private static void awaitQuietly(CountDownLatch latch) {
        try {
            assertThat(latch.await(LONG.toSeconds(), TimeUnit.SECONDS)).isTrue();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    @Test
    void tryAllocateIsEmptyWithoutMemoryButBadArgumentsStillThrow() {
        fill();

        assertThat(manager.tryAllocate(BLOCK, DEVICE)).isEmpty();
        assertThat(manager.tryAllocate(DataType.FLOAT64, 1, DEVICE)).as("a small block needs a segment of its own").isEmpty();
        assertThat(manager.tryAllocate(8 * BLOCK, DEVICE)).as("above the cap").isEmpty();
        assertThatThrownBy(() -> manager.tryAllocate(0, DEVICE)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> manager.tryAllocate(DataType.FLOAT32, -1)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> manager.allocateAsync(BLOCK, DEVICE, Duration.ofSeconds(-1))).isInstanceOf(IllegalArgumentException.class);
        assertThat(failuresTold).as("an empty result is a failure listeners hear of").hasValue(3);
        held.removeFirst().close();
        assertThat(manager.tryAllocate(BLOCK)).hasValueSatisfying(held::add);
    }
}
