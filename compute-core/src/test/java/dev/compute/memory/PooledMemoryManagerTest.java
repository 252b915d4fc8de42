package dev.compute.memory;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/** What the manager's close leaves behind when it cannot free everything (a freed close is in the backend contract). */
class PooledMemoryManagerTest {

    @Test
    void aCloseThatKeepsMemoryUnderAViewSaysWhatItKept() throws Exception {
        SimulatedDiscreteBackend backend = new SimulatedDiscreteBackend();
        UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(backend).closeTimeout(Duration.ofMillis(200))
                .timelineInterval(Duration.ZERO).build();
        UnifiedBuffer held = manager.allocate(4096, MemoryLocation.HOST);
        manager.allocate(700, MemoryLocation.HOST).close();
        MemoryStatistics before = manager.statistics(MemoryLocation.HOST);
        CountDownLatch viewing = new CountDownLatch(1);
        CountDownLatch letGo = new CountDownLatch(1);
        AtomicReference<RuntimeException> refused = new AtomicReference<>();
        Thread holder = Thread.ofPlatform().start(() -> {
            try (ViewScope scope = ViewScope.open()) { // a request's views: confined to the thread, ended with the scope
                held.hostView();
                viewing.countDown();
                try {
                    letGo.await();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                try {
                    manager.allocate(1).close();
                } catch (IllegalStateException closed) {
                    refused.set(closed); // told the manager closed, this thread has lost its views
                }
            }
        });
        viewing.await();

        manager.close();

        assertThat(held.isClosed()).isTrue();
        MemoryStatistics kept = manager.statistics(MemoryLocation.HOST);
        assertThat(kept.reservedBytes()).as("kept, not freed").isEqualTo(before.reservedBytes()).isPositive();
        assertThat(backend.liveAllocations()).isPositive();
        assertThat(kept.allocatedBytes()).as("the block under the view").isEqualTo(before.allocatedBytes()).isPositive();
        assertThat(kept.requestedBytes()).isEqualTo(4096);
        assertThat(kept.liveBuffers()).isEqualTo(1);
        assertThat(kept.cachedBytes()).isEqualTo(kept.reservedBytes() - kept.allocatedBytes());
        assertThat(manager.snapshot(MemoryLocation.HOST).segments()).flatExtracting(MemorySnapshot.Segment::blocks)
                .filteredOn(block -> block.state() == MemorySnapshot.BlockState.LIVE).singleElement()
                .satisfies(block -> assertThat(block.requestedBytes()).isEqualTo(4096));

        letGo.countDown();
        holder.join();
        assertThat(refused.get()).hasMessageContaining("closed");
        held.close();

        MemoryStatistics released = manager.statistics(MemoryLocation.HOST);
        assertThat(released.allocatedBytes()).isZero();
        assertThat(released.liveBuffers()).isZero();
        assertThat(released.reservedBytes()).as("the pool still keeps the memory; nothing frees it now").isEqualTo(kept.reservedBytes());
        assertThat(released.cachedBytes()).isEqualTo(released.reservedBytes());
    }
    /**
     * Two threads pass 6 MiB to each other through the pool under an 8 MiB cap: one closes what the other then takes.
     * Only one can hold it at a time, so no figure may count both: the allocated peak stays within the reserved one.
     */
    @Test
    void theAllocatedPeakNeverExceedsTheCapWhileThreadsCloseAndAllocateAtOnce() throws InterruptedException {
        long cap = 8L << 20;
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend()).maxPoolSize(cap)
                .timelineInterval(Duration.ZERO).trimInterval(Duration.ZERO).build()) {
            long until = System.nanoTime() + 1_000_000_000L;
            AtomicReference<Throwable> failure = new AtomicReference<>();
            Runnable churn = () -> {
                try {
                    while (System.nanoTime() < until) {
                        manager.tryAllocate(6L << 20, MemoryLocation.DEVICE).ifPresent(UnifiedBuffer::close);
                    }
                } catch (Throwable e) {
                    failure.compareAndSet(null, e);
                }
            };
            Thread first = Thread.ofPlatform().start(churn);
            Thread second = Thread.ofPlatform().start(churn);
            first.join(30_000);
            second.join(30_000);

            assertThat(failure.get()).isNull();
            MemoryStatistics figures = manager.statistics(MemoryLocation.DEVICE);
            assertThat(figures.reservedBytesPeak()).isLessThanOrEqualTo(cap);
            assertThat(figures.allocatedBytesPeak()).as("allocated at once, never more than the cap lets the pool reserve")
                    .isLessThanOrEqualTo(figures.reservedBytesPeak());
        }
    }
}
