package dev.compute.memory.resource;

import static dev.compute.memory.resource.PoolInvariants.figures;
import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemoryStatistics;
import dev.compute.memory.testing.AddressSpaceBackend;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** The figures are counted per thread stripe: they must still add up, and peaks be exact on one thread. */
class StatisticsResourceTest {

    private static final long MiB = 1L << 20;

    private final AddressSpaceBackend backend = new AddressSpaceBackend(8L << 30, AddressSpaceBackend.DEFAULT_GRANULARITY, true);
    private final StatisticsResource statistics = new StatisticsResource(
            new CachingPoolResource(backend, MemoryLocation.DEVICE, new PoolSettings(8L << 30, 0, true)));

    @AfterEach
    void close() {
        statistics.close();
    }

    @Test
    void onOneThreadPeaksAreExactForBlocksTooSmallToBePublished() {
        Block a = statistics.allocate(4096);
        Block b = statistics.allocate(4000);
        statistics.deallocate(a);
        Block c = statistics.allocate(100_000);
        statistics.deallocate(b);
        statistics.deallocate(c);

        MemoryStatistics.Builder figures = figures(statistics);
        assertThat(figures.allocatedBytes).isZero();
        assertThat(figures.requestedBytes).isZero();
        assertThat(figures.allocatedBytesPeak).as("b and c were live together").isEqualTo(4096 + 100_352);
        assertThat(figures.requestedBytesPeak).isEqualTo(4000 + 100_000);
        assertThat(figures.allocations).isEqualTo(3);
        assertThat(figures.frees).isEqualTo(3);
        assertThat(figures.liveBuffers).isZero();
    }

    @Test
    void peaksMixPublishedAndUnpublishedBytes() {
        Block small = statistics.allocate(1000);
        Block large = statistics.allocate(5 * MiB);
        statistics.deallocate(large);
        Block medium = statistics.allocate(2 * MiB);

        MemoryStatistics.Builder figures = figures(statistics);
        assertThat(figures.allocatedBytes).isEqualTo(1024 + 2 * MiB);
        assertThat(figures.allocatedBytesPeak).isEqualTo(1024 + 5 * MiB);
        statistics.deallocate(small);
        statistics.deallocate(medium);
        assertThat(figures(statistics).allocatedBytes).isZero();
    }

    @Test
    void blocksFreedOnAnotherThreadAddUpExactly() throws InterruptedException {
        BlockingQueue<Block> handOver = new ArrayBlockingQueue<>(1000);
        List<Block> allocated = new ArrayList<>();
        Thread consumer = Thread.ofPlatform().start(() -> {
            try {
                for (int i = 0; i < 300; i++) {
                    statistics.deallocate(handOver.take());
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        long expectedPeak = 0;
        for (int i = 0; i < 300; i++) {
            // small blocks stay in this thread's stripe, the 3 MiB ones are published at once
            Block block = statistics.allocate(i % 3 == 0 ? 3 * MiB : 700 + i);
            allocated.add(block);
            expectedPeak += block.size();
        }
        MemoryStatistics.Builder whileHeld = figures(statistics);
        assertThat(whileHeld.allocatedBytes).isEqualTo(expectedPeak);
        assertThat(whileHeld.allocatedBytesPeak).isEqualTo(expectedPeak);
        allocated.forEach(handOver::add);
        consumer.join();

        MemoryStatistics.Builder after = figures(statistics);
        assertThat(after.allocatedBytes).as("this thread's stripe is up, the consumer's down by as much").isZero();
        assertThat(after.requestedBytes).isZero();
        assertThat(after.allocatedBytesPeak).isEqualTo(expectedPeak);
        assertThat(after.allocations).isEqualTo(300);
        assertThat(after.frees).isEqualTo(300);
        assertThat(after.liveBuffers).isZero();
    }
}
