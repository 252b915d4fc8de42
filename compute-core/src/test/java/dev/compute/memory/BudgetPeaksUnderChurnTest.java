package dev.compute.memory;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Peaks exactly the most held at once, never above it; a location's the total's where a budget has one location. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class BudgetPeaksUnderChurnTest {

    private static final long MiB = 1L << 20;
    private static final long KiB = 1L << 10;
    private static final MemoryLocation DEVICE = MemoryLocation.DEVICE;

    @Test
    void peaksOfThreadsChurningThroughAChildStayWithinWhatTheyCouldHoldAtOnce() throws Exception {
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend()).timelineInterval(Duration.ZERO)
                .trimInterval(Duration.ZERO).maxPoolSize(64 * MiB).build();
             MemoryBudget tenant = manager.budget("tenant", 64 * MiB);
             MemoryBudget child = tenant.child("child", 32 * MiB)) {
            int threads = 4;
            churn(threads, 3000, new Semaphore(threads), (i, seed) -> {
                switch (i % 3) {
                    case 0 -> child.allocate(256 * KiB, DEVICE).close();
                    case 1 -> child.allocateBatch(DataType.INT8, new long[] {128 * KiB, 128 * KiB}, DEVICE).forEach(UnifiedBuffer::close);
                    default -> child.tryAllocate(256 * KiB, DEVICE).orElseThrow().close();
                }
            });
            BudgetStatistics c = child.statistics();
            BudgetStatistics p = tenant.statistics();
            assertThat(c.allocatedBytes()).isZero();
            assertThat(p.allocatedBytes()).isZero();
            assertThat(c.liveBuffers()).isZero();
            assertThat(c.allocatedBytesPeak()).as(c.toString()).isBetween(256 * KiB, threads * 256 * KiB);
            assertThat(p.allocatedBytesPeak()).as(p.toString()).isEqualTo(c.allocatedBytesPeak()); // the tenant holds only through its child
            assertThat(c.locations().get(DEVICE).allocatedBytesPeak()).isEqualTo(c.allocatedBytesPeak());
            assertThat(c.allocations()).isEqualTo(threads * 4000L);
            // one more held with all closed: the peak does not move
            try (UnifiedBuffer one = child.allocate(256 * KiB, DEVICE)) {
                assertThat(child.statistics().allocatedBytesPeak()).isEqualTo(c.allocatedBytesPeak());
            }
        }
    }

    @Test
    void peaksAreWhatWasHeldAtOnceNeverMoreWhileMoreThreadsThanStripesChurn() throws Exception {
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend()).timelineInterval(Duration.ZERO)
                .trimInterval(Duration.ZERO).maxPoolSize(64 * MiB).build();
             MemoryBudget tenant = manager.budget("tenant", 64 * MiB)) {
            // at most `atOnce` buffers held at any moment (each counted from its request to its close, inside the permit)
            // by more threads than stripes: one's free lets another allocate at once, on another stripe, while peaks
            // are raised; a fresh child each round, as a peak rises most while it is new
            int threads = 8;
            int atOnce = 3;
            Semaphore permits = new Semaphore(atOnce);
            for (int round = 0; round < 100; round++) {
                try (MemoryBudget child = tenant.child("child-" + round, 32 * MiB)) {
                    churn(threads, 200, permits, (i, seed) -> child.allocate(((i + seed) % 4 + 1) * 64 * KiB, DEVICE).close());
                    BudgetStatistics c = child.statistics();
                    assertThat(c.allocatedBytes()).isZero();
                    assertThat(c.allocatedBytesPeak()).as("round %d: %s", round, c).isBetween(256 * KiB, atOnce * 256 * KiB);
                    // one location: its peak is the total's
                    assertThat(c.locations().get(DEVICE).allocatedBytesPeak()).as("round %d: %s", round, c).isEqualTo(c.allocatedBytesPeak());
                }
            }
            // the tenant held only through its children, one at a time
            BudgetStatistics p = tenant.statistics();
            assertThat(p.allocatedBytesPeak()).as(p.toString()).isBetween(256 * KiB, atOnce * 256 * KiB);
            assertThat(p.locations().get(DEVICE).allocatedBytesPeak()).as(p.toString()).isEqualTo(p.allocatedBytesPeak());
        }
    }

    @Test
    void aParentsPeakAtALocationIsItsOnlyChildsThereWhileTwoChildrenChurnAtTwoLocations() throws Exception {
        MemoryLocation host = MemoryLocation.HOST;
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend()).timelineInterval(Duration.ZERO)
                .trimInterval(Duration.ZERO).maxPoolSize(64 * MiB).build();
             MemoryBudget tenant = manager.budget("tenant", 64 * MiB);
             MemoryBudget onDevice = tenant.child("device", 16 * MiB);
             MemoryBudget onHost = tenant.child("host", 16 * MiB)) {
            int threads = 6;
            Semaphore permits = new Semaphore(4);
            churn(threads, 3000, permits, (i, seed) -> {
                long bytes = ((i + seed) % 3 + 1) * 64 * KiB;
                if ((i + seed) % 2 == 0) {
                    onDevice.allocate(bytes, DEVICE).close();
                } else {
                    onHost.allocate(bytes, host).close();
                }
            });
            BudgetStatistics d = onDevice.statistics();
            BudgetStatistics h = onHost.statistics();
            BudgetStatistics p = tenant.statistics();
            // each child at one location; the tenant holds at each location through one child alone
            assertThat(d.locations().get(DEVICE).allocatedBytesPeak()).as(d.toString()).isEqualTo(d.allocatedBytesPeak());
            assertThat(h.locations().get(host).allocatedBytesPeak()).as(h.toString()).isEqualTo(h.allocatedBytesPeak());
            assertThat(p.locations().get(DEVICE).allocatedBytesPeak()).as(p.toString()).isEqualTo(d.allocatedBytesPeak());
            assertThat(p.locations().get(host).allocatedBytesPeak()).as(p.toString()).isEqualTo(h.allocatedBytesPeak());
            assertThat(p.allocatedBytesPeak()).as(p.toString())
                    .isBetween(Math.max(d.allocatedBytesPeak(), h.allocatedBytesPeak()), Math.min(4 * 192 * KiB, d.allocatedBytesPeak() + h.allocatedBytesPeak()));
            assertThat(d.allocatedBytesPeak()).isLessThanOrEqualTo(4 * 192 * KiB);
            assertThat(h.allocatedBytesPeak()).isLessThanOrEqualTo(4 * 192 * KiB);
        }
    }

    /** One allocation and free of a churn: the {@code i}th of thread {@code seed}. */
    @FunctionalInterface
    private interface Step {
        void run(int i, int seed);
    }

    /** {@code threads} platform threads started together, each taking {@code times} steps, each step holding one of {@code permits}. */
    private static void churn(int threads, int times, Semaphore permits, Step step) throws InterruptedException {
        CountDownLatch start = new CountDownLatch(1);
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int seed = t;
            workers.add(Thread.ofPlatform().start(() -> {
                try {
                    start.await();
                    for (int i = 0; i < times; i++) {
                        permits.acquire();
                        try {
                            step.run(i, seed);
                        } finally {
                            permits.release();
                        }
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }));
        }
        start.countDown();
        for (Thread worker : workers) {
            worker.join();
        }
    }
}
