package dev.compute.memory.resource;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemoryEventListener;
import dev.compute.memory.internal.ThreadStripes;
import dev.compute.memory.resource.pool.CachingPoolResource;
import dev.compute.memory.testing.AddressSpaceBackend;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** The figures are counted per thread stripe: they must still add up, and peaks be exact whichever thread frees. */
class StatisticsResourceTest extends MemoryResourceContract {

    private static final long GiB = 1L << 30;

    private final AddressSpaceBackend poolBackend = new AddressSpaceBackend(8L << 30, AddressSpaceBackend.DEFAULT_GRANULARITY, true);
    private final CachingPoolResource pool = pool(8L << 30, PoolSettings.DEFAULT_DEVICE_WAIT_TIMEOUT);
    private final StatisticsResource statistics = new StatisticsResource(pool);

    private CachingPoolResource pool(long limit, Duration deviceWaitTimeout) {
        return new CachingPoolResource(new BackendResource(poolBackend, MemoryLocation.DEVICE, limit, "limit", deviceWaitTimeout,
                MemoryEventListener.NONE), PoolSettings.expandable().withDeviceWaitTimeout(deviceWaitTimeout), MemoryEventListener.NONE);
    }

    @Override
    protected MemoryResource create(BackendResource upstream) {
        return new StatisticsResource(upstream);
    }

    @AfterEach
    void closeStatistics() {
        statistics.close();
    }

    /**
     * Another thread takes the memory a free gives back the moment the pool has it, before the freeing call returns:
     * that allocation was possible only because of the free, so the peak never counts both.
     */
    @Test
    void anAllocationThatAFreeMadePossibleNeverRaisesThePeakAboveWhatWasHeld() throws Exception {
        AtomicReference<Block> takenMeanwhile = new AtomicReference<>();
        StatisticsResource[] counted = new StatisticsResource[1];
        MemoryResource lendsAtOnce = new MemoryResource() {
            @Override
            public Block allocate(long bytes) {
                return pool.allocate(bytes);
            }

            @Override
            public void deallocate(Block block, CompletableFuture<?> inFlight) {
                pool.deallocate(block, inFlight);
                // the pool has the memory again: another thread allocates it before this free returns
                Thread other = Thread.ofPlatform().start(() -> takenMeanwhile.set(counted[0].allocate(6 * MiB)));
                try {
                    other.join(10_000);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }

            @Override
            public void close() {}
        };
        counted[0] = new StatisticsResource(lendsAtOnce);
        Block first = counted[0].allocate(6 * MiB);

        counted[0].deallocate(first);

        assertThat(takenMeanwhile.get()).isNotNull();
        StatisticsResource.Counts figures = counted[0].counts();
        assertThat(figures.allocatedBytes()).isEqualTo(6 * MiB);
        assertThat(figures.allocatedBytesPeak()).as("6 MiB were held at any moment").isEqualTo(6 * MiB);
        assertThat(figures.requestedBytesPeak()).isEqualTo(6 * MiB);
        pool.deallocate(takenMeanwhile.get());
    }

    /** The caller gave the block up, whatever the upstream's free threw: counted as freed, as the manager carries on. */
    @Test
    void aFreeTheUpstreamThrowsFromIsCountedAsTheCallerGaveItUp() {
        MemoryResource throwing = new MemoryResource() {
            @Override
            public Block allocate(long bytes) {
                return pool.allocate(bytes);
            }

            @Override
            public void deallocate(Block block, CompletableFuture<?> inFlight) {
                pool.deallocate(block, inFlight);
                throw new IllegalStateException("failed after giving it back");
            }

            @Override
            public void close() {}
        };
        StatisticsResource counted = new StatisticsResource(throwing);
        Block block = counted.allocate(MiB);

        assertThatThrownBy(() -> counted.deallocate(block)).hasMessage("failed after giving it back");

        StatisticsResource.Counts figures = counted.counts();
        assertThat(figures.allocatedBytes()).isZero();
        assertThat(figures.liveBlocks()).isZero();
        assertThat(figures.allocatedBytesPeak()).isEqualTo(MiB);
    }

    @Test
    void blocksPlacedTogetherAreCountedOneByOneAndNothingWhereNoneArePlaced() {
        statistics.deallocate(statistics.allocate(16 * MiB));

        List<Block> together = statistics.allocateAdjacent(new long[] {3 * MiB, 2 * MiB});

        assertThat(together).hasSize(2);
        StatisticsResource.Counts figures = statistics.counts();
        assertThat(figures.allocations()).isEqualTo(3);
        assertThat(figures.allocatedBytes()).isEqualTo(5 * MiB);
        assertThat(figures.requestedBytes()).isEqualTo(5 * MiB);
        together.forEach(statistics::deallocate);
        assertThat(statistics.counts().liveBlocks()).isZero();

        assertThat(resource.allocateAdjacent(new long[] {4096})).as("the backend's resource places nothing together").isNull();
        assertThat(((StatisticsResource) resource).counts().allocations()).isZero();
    }

    @Test
    void onOneThreadPeaksAreExactForBlocksTooSmallToBePublished() {
        Block a = statistics.allocate(4096);
        Block b = statistics.allocate(4000);
        statistics.deallocate(a);
        Block c = statistics.allocate(100_000);
        statistics.deallocate(b);
        statistics.deallocate(c);

        StatisticsResource.Counts figures = statistics.counts();
        assertThat(figures.allocatedBytes()).isZero();
        assertThat(figures.requestedBytes()).isZero();
        assertThat(figures.allocatedBytesPeak()).as("b and c were live together").isEqualTo(4096 + 100_352);
        assertThat(figures.requestedBytesPeak()).isEqualTo(4000 + 100_000);
        assertThat(figures.allocations()).isEqualTo(3);
        assertThat(figures.frees()).isEqualTo(3);
        assertThat(figures.liveBlocks()).isZero();
    }

    @Test
    void peaksMixPublishedAndUnpublishedBytes() {
        Block small = statistics.allocate(1000);
        Block large = statistics.allocate(5 * MiB);
        statistics.deallocate(large);
        Block medium = statistics.allocate(2 * MiB);

        StatisticsResource.Counts figures = statistics.counts();
        assertThat(figures.allocatedBytes()).isEqualTo(1024 + 2 * MiB);
        assertThat(figures.allocatedBytesPeak()).isEqualTo(1024 + 5 * MiB);
        statistics.deallocate(small);
        statistics.deallocate(medium);
        assertThat(statistics.counts().allocatedBytes()).isZero();
    }

    @Test
    void aPeakIsExactWhenOneThreadAllocatesAndAnotherFrees() throws Exception {
        for (int round = 1; round <= 3; round++) {
            List<Block> blocks = new ArrayList<>();
            for (int i = 0; i < 2_000; i++) {
                blocks.add(statistics.allocate(512));
            }
            Thread freer = onAnotherStripe(() -> blocks.forEach(statistics::deallocate));
            freer.join();

            StatisticsResource.Counts figures = statistics.counts();
            assertThat(figures.allocatedBytes()).as("round %d", round).isZero();
            assertThat(figures.allocatedBytesPeak()).as("round %d: 2,000 blocks of 512 bytes were live at most", round)
                    .isEqualTo(2_000 * 512);
            assertThat(figures.requestedBytesPeak()).isEqualTo(2_000 * 512);
            assertThat(figures.liveBlocks()).isZero();
        }
    }

    @Test
    void aPeakFollowsWhatWasLiveAtOnceWhileAProducerAndAConsumerRun() throws Exception {
        // at most 8 blocks queued, one in the producer's hand, one in the consumer's: never more than 10 live
        BlockingQueue<Block> queue = new ArrayBlockingQueue<>(8);
        int blocks = 20_000;
        Thread consumer = onAnotherStripe(() -> {
            try {
                for (int i = 0; i < blocks; i++) {
                    statistics.deallocate(queue.take());
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        for (int i = 0; i < blocks; i++) {
            queue.put(statistics.allocate(512));
        }
        consumer.join();

        StatisticsResource.Counts figures = statistics.counts();
        assertThat(figures.allocatedBytes()).isZero();
        assertThat(figures.allocatedBytesPeak()).isBetween(512L, 10 * 512L);
        assertThat(figures.allocations()).isEqualTo(blocks);
        assertThat(figures.frees()).isEqualTo(blocks);
    }

    @Test
    void blocksStillLiveWhenTheChainClosedAreCountedFreedWhenTheMemoryWentBackWithIt() {
        statistics.allocate(4096);
        statistics.allocate(5 * MiB);
        statistics.deallocate(statistics.allocate(700));

        statistics.close();
        assertThat(pool.reservedBytes()).as("the pool freed everything").isZero();
        statistics.countAllFreed();

        StatisticsResource.Counts figures = statistics.counts();
        assertThat(figures.allocatedBytes()).isZero();
        assertThat(figures.requestedBytes()).isZero();
        assertThat(figures.liveBlocks()).isZero();
        assertThat(figures.allocations()).isEqualTo(3);
        assertThat(figures.frees()).isEqualTo(3);
        assertThat(figures.allocatedBytesPeak()).as("peaks are history: the close keeps them").isEqualTo(4096 + 5 * MiB + 1024);
    }

    @Test
    void aPoolThatKeepsItsMemoryOnCloseKeepsItsBlocksCounted() {
        CachingPoolResource keepingPool = pool(GiB, Duration.ofMillis(100));
        StatisticsResource keeping = new StatisticsResource(keepingPool);
        Block live = keeping.allocate(3 * MiB);
        keeping.deallocate(keeping.allocate(MiB), new CompletableFuture<>()); // device work that never finishes

        keeping.close();

        assertThat(keepingPool.reservedBytes()).as("kept under the stuck work").isEqualTo(poolBackend.usedBytes()).isPositive();
        StatisticsResource.Counts figures = keeping.counts();
        assertThat(figures.allocatedBytes()).as("the live block, kept with it").isEqualTo(live.size());
        assertThat(figures.liveBlocks()).isEqualTo(1);
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
            Block block = statistics.allocate(i % 3 == 0 ? 3 * MiB : 700 + i);
            allocated.add(block);
            expectedPeak += block.size();
        }
        StatisticsResource.Counts whileHeld = statistics.counts();
        assertThat(whileHeld.allocatedBytes()).isEqualTo(expectedPeak);
        assertThat(whileHeld.allocatedBytesPeak()).isEqualTo(expectedPeak);
        allocated.forEach(handOver::add);
        consumer.join();

        StatisticsResource.Counts after = statistics.counts();
        assertThat(after.allocatedBytes()).isZero();
        assertThat(after.requestedBytes()).isZero();
        assertThat(after.allocatedBytesPeak()).isEqualTo(expectedPeak);
        assertThat(after.allocations()).isEqualTo(300);
        assertThat(after.frees()).isEqualTo(300);
        assertThat(after.liveBlocks()).isZero();
    }

    @Test
    void threadsSharingStripesCountEveryAllocationAndFreeExactly() throws InterruptedException {
        int threads = ThreadStripes.COUNT * 3; // more threads than stripes: some stripes are counted on by several at once
        int pairsEach = 2_000;
        long size = 4 * 1024;
        CountDownLatch start = new CountDownLatch(1);
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            workers.add(Thread.ofPlatform().start(() -> {
                try {
                    start.await();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return;
                }
                for (int i = 0; i < pairsEach; i++) {
                    statistics.deallocate(statistics.allocate(size));
                }
            }));
        }
        start.countDown();
        for (Thread worker : workers) {
            worker.join();
        }

        StatisticsResource.Counts after = statistics.counts();
        assertThat(after.allocations()).isEqualTo((long) threads * pairsEach);
        assertThat(after.frees()).isEqualTo((long) threads * pairsEach);
        assertThat(after.allocatedBytes()).isZero();
        assertThat(after.requestedBytes()).isZero();
        assertThat(after.requestedBytesPeak()).as("at most one block per thread was live at once").isBetween(size, threads * size);
    }

    /** A thread running {@code work} on another stripe than this thread's, as two threads mostly are (ids can collide). */
    private static Thread onAnotherStripe(Runnable work) {
        int callers = ThreadStripes.ofCurrentThread();
        return Thread.ofPlatform().start(() -> {
            while (ThreadStripes.ofCurrentThread() == callers) {
                ThreadStripes.contended();
            }
            work.run();
        });
    }
}
