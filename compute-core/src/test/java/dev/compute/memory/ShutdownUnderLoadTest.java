package dev.compute.memory;

import static org.assertj.core.api.Assertions.assertThat;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import dev.compute.memory.testing.LogCapture;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.logging.Level;
import org.junit.jupiter.api.RepeatedTest;
import org.junit.jupiter.api.Test;

/** Closing the manager while threads allocate, copy and free: no crash, every segment freed, live buffers reported. */
class ShutdownUnderLoadTest {

    @RepeatedTest(3)
    void closeWhileThreadsAllocate() throws Exception {
        SimulatedDiscreteBackend device = new SimulatedDiscreteBackend();
        UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(device).leakDetection(LeakDetectionLevel.PARANOID)
                .timelineInterval(Duration.ofMillis(5)).trimInterval(Duration.ofMillis(5)).build();
        AtomicLong refusedAfterClose = new AtomicLong();
        ExecutorService threads = Executors.newFixedThreadPool(3);
        List<Future<?>> workers = new ArrayList<>();
        for (int t = 0; t < 3; t++) {
            workers.add(threads.submit(() -> {
                ThreadLocalRandom random = ThreadLocalRandom.current();
                List<UnifiedBuffer> mine = new ArrayList<>();
                while (true) {
                    try {
                        UnifiedBuffer b = manager.allocate(1 + random.nextInt(100_000),
                                random.nextBoolean() ? MemoryLocation.DEVICE : MemoryLocation.HOST);
                        mine.add(b);
                        b.copyFrom(new byte[(int) Math.min(b.byteSize(), 512)]);
                        b.hostView();
                        if (mine.size() > 8) {
                            mine.remove(0).close();
                        }
                    } catch (IllegalStateException closed) {
                        assertThat(closed).hasMessageContaining("closed");
                        refusedAfterClose.incrementAndGet();
                        mine.forEach(UnifiedBuffer::close);
                        return null;
                    }
                }
            }));
        }
        Thread.sleep(200);
        manager.close();
        for (Future<?> worker : workers) {
            worker.get();
        }
        threads.shutdown();
        assertThat(refusedAfterClose.get()).isEqualTo(3);
        assertThat(device.liveAllocations()).as("every segment freed").isZero();
        assertThat(device.isClosed()).isTrue();
    }
    /**
     * A service goes on calling while its manager closes (requests still arrive): each call of the closed manager is
     * refused, but an allocation was counted in as a call under way first and found the manager closed only inside,
     * while it made its exception; threads calling in a loop so kept the close from ever seeing no call under way, and
     * it waited out its timeout and kept every pool's memory ("calls were still under way"), none of them a call it
     * had to wait for.
     */
    @Test
    void callsRefusedAfterTheCloseDoNotKeepItsMemory() throws Exception {
        SimulatedDiscreteBackend device = new SimulatedDiscreteBackend();
        UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(device).closeTimeout(Duration.ofSeconds(1))
                .timelineInterval(Duration.ZERO).trimInterval(Duration.ZERO).build();
        manager.allocate(1 << 20, MemoryLocation.DEVICE).close(); // cached: memory the close frees
        AtomicBoolean closeReturned = new AtomicBoolean();
        CountDownLatch calling = new CountDownLatch(3);
        List<Thread> callers = new ArrayList<>();
        for (int t = 0; t < 3; t++) {
            callers.add(Thread.ofPlatform().daemon().start(() -> {
                calling.countDown();
                while (!closeReturned.get()) {
                    try {
                        manager.tryAllocate(4096, MemoryLocation.HOST).ifPresent(UnifiedBuffer::close);
                    } catch (IllegalStateException refused) {
                        // the manager is closed: the request fails, the next one comes
                    }
                }
            }));
        }
        calling.await();
        manager.close();
        closeReturned.set(true);
        for (Thread caller : callers) {
            caller.join();
        }
        assertThat(device.liveAllocations()).as("every segment freed").isZero();
        assertThat(manager.statistics(MemoryLocation.DEVICE).reservedBytes()).isZero();
    }

    /**
     * A close by an interrupted thread while another thread holds an access past the close timeout: the close waits the
     * timeout out (it keeps the pools' memory), without spinning a core on the interrupt, which it keeps. Its wait
     * parked, which returns at once while the interrupt is set: the closing thread used 1.8 s of CPU in a 2 s timeout.
     */
    @Test
    void anInterruptedCloseWaitingForAnotherThreadsAccessDoesNotSpin() throws Exception {
        ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        assumeTrue(threads.isCurrentThreadCpuTimeSupported());
        Duration closeTimeout = Duration.ofSeconds(2);
        UnifiedMemoryManager manager = SmallSimulatedPools.builder().closeTimeout(closeTimeout).build();
        UnifiedBuffer buffer = manager.allocate(4096, MemoryLocation.HOST);
        CountDownLatch open = new CountDownLatch(1);
        CountDownLatch closed = new CountDownLatch(1);
        Thread holder = Thread.ofPlatform().start(() -> {
            try (BufferAccess access = buffer.hostAccess(AccessMode.READ)) {
                open.countDown();
                closed.await(30, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        try (LogCapture log = LogCapture.managerLog()) {
            assertThat(open.await(30, TimeUnit.SECONDS)).isTrue();
            long cpuBefore = threads.getCurrentThreadCpuTime();
            Thread.currentThread().interrupt();
            manager.close();
            boolean interruptKept = Thread.interrupted();
            long cpuNanos = threads.getCurrentThreadCpuTime() - cpuBefore;

            assertThat(interruptKept).isTrue();
            assertThat(Duration.ofNanos(cpuNanos)).as("the closing thread's CPU time").isLessThan(closeTimeout.dividedBy(4));
            assertThat(log.messages(Level.WARNING)).singleElement().asString().contains("views or accesses were still open");
        } finally {
            closed.countDown();
            holder.join(30_000);
        }
    }

    /**
     * A close while another thread's call is held past the close timeout (its out-of-memory handler waiting): the close
     * waits the timeout out (it keeps the pools' memory) without spinning a core for it.
     */
    @Test
    void aCloseWaitingForACallUnderWayDoesNotSpin() throws Exception {
        ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        assumeTrue(threads.isCurrentThreadCpuTimeSupported());
        Duration closeTimeout = Duration.ofSeconds(2);
        AtomicBoolean hold = new AtomicBoolean();
        CountDownLatch inHandler = new CountDownLatch(1);
        CountDownLatch closed = new CountDownLatch(1);
        UnifiedMemoryManager manager = SmallSimulatedPools.builder().closeTimeout(closeTimeout).outOfMemoryHandler((location, bytes, attempt, failure) -> {
            if (hold.getAndSet(false)) {
                inHandler.countDown();
                try {
                    closed.await(30, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
            return false;
        }).build();
        assertThat(SmallSimulatedPools.fill(manager, 8L << 20)).isNotEmpty();
        hold.set(true);
        Thread caller = Thread.ofPlatform().start(() -> manager.tryAllocate(8L << 20, MemoryLocation.DEVICE));
        try (LogCapture log = LogCapture.managerLog()) {
            assertThat(inHandler.await(30, TimeUnit.SECONDS)).isTrue();
            long cpuBefore = threads.getCurrentThreadCpuTime();
            manager.close();
            long cpuNanos = threads.getCurrentThreadCpuTime() - cpuBefore;

            assertThat(Duration.ofNanos(cpuNanos)).as("the closing thread's CPU time").isLessThan(closeTimeout.dividedBy(4));
            assertThat(log.messages(Level.WARNING)).singleElement().asString().contains("calls were still under way");
        } finally {
            closed.countDown();
            caller.join(30_000);
        }
    }
}
