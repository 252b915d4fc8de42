package dev.compute.memory.resource;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Bytes in use and their peaks, counted per thread stripe as headroom under the peak: exact once no call is under way,
 * whichever thread frees what another allocated, with peaks that never exceed what was held at once, a free taken back,
 * and everything counted freed at once when the memory went back as a whole.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class StripedByteCountersTest {

    private final StripedByteCounters counters = new StripedByteCounters();

    @Test
    void onOneThreadTheFiguresAndPeaksAreExact() {
        counters.allocated(1024, 1000);
        counters.allocated(4096, 4000);
        counters.freed(1024, 1000);
        counters.allocated(512, 500);

        StatisticsResource.Counts figures = counters.read();
        assertThat(figures.allocatedBytes()).isEqualTo(4096 + 512);
        assertThat(figures.allocatedBytesPeak()).as("the first two were live together").isEqualTo(1024 + 4096);
        assertThat(figures.requestedBytes()).isEqualTo(4000 + 500);
        assertThat(figures.requestedBytesPeak()).isEqualTo(1000 + 4000);
        assertThat(figures.allocations()).isEqualTo(3);
        assertThat(figures.frees()).isEqualTo(1);
        assertThat(figures.liveBlocks()).isEqualTo(2);
    }

    @Test
    void aPeakIsRaisedOnlyByWhatIsHeldAtOnce() {
        for (int i = 0; i < 100; i++) {
            counters.allocated(2048, 2048);
            counters.freed(2048, 2048);
        }
        counters.allocated(2048, 2048);
        counters.allocated(2048, 2048);

        StatisticsResource.Counts figures = counters.read();
        assertThat(figures.allocatedBytesPeak()).isEqualTo(4096);
        assertThat(figures.allocatedBytes()).isEqualTo(4096);
        assertThat(figures.allocations()).isEqualTo(102);
    }

    @Test
    void freeingAllCountsEveryLiveBlockFreedAndKeepsThePeaks() {
        counters.allocated(1024, 1000);
        counters.allocated(2048, 2000);
        counters.freed(1024, 1000);

        counters.freeAll();

        StatisticsResource.Counts figures = counters.read();
        assertThat(figures.allocatedBytes()).isZero();
        assertThat(figures.requestedBytes()).isZero();
        assertThat(figures.liveBlocks()).isZero();
        assertThat(figures.frees()).isEqualTo(2);
        assertThat(figures.allocatedBytesPeak()).isEqualTo(3072);
        assertThat(figures.requestedBytesPeak()).isEqualTo(3000);
    }

    @Test
    void aThreadThatFreesWhatAnotherAllocatesLeavesExactFiguresAndNoInflatedPeak() throws Exception {
        int blocks = 20_000;
        BlockingQueue<Long> handOver = new ArrayBlockingQueue<>(1);
        AtomicReference<Throwable> failure = new AtomicReference<>();
        Thread consumer = Thread.ofPlatform().start(() -> {
            try {
                for (int i = 0; i < blocks; i++) {
                    long size = handOver.poll(10, TimeUnit.SECONDS);
                    counters.freed(size, size - 1);
                }
            } catch (Throwable t) {
                failure.set(t);
            }
        });
        // at most three blocks are ever live: one being freed, one handed over and the one allocated next
        for (int i = 0; i < blocks; i++) {
            long size = 512L * (1 + i % 4);
            counters.allocated(size, size - 1);
            assertThat(handOver.offer(size, 10, TimeUnit.SECONDS)).isTrue();
        }
        consumer.join(30_000);

        assertThat(failure.get()).isNull();
        StatisticsResource.Counts figures = counters.read();
        assertThat(figures.allocatedBytes()).isZero();
        assertThat(figures.requestedBytes()).isZero();
        assertThat(figures.allocations()).isEqualTo(blocks);
        assertThat(figures.frees()).isEqualTo(blocks);
        assertThat(figures.allocatedBytesPeak()).as("never more than three of the largest live at once").isLessThanOrEqualTo(3 * 2048);
        assertThat(figures.allocatedBytesPeak()).isGreaterThanOrEqualTo(2048);
    }

    @Test
    void threadsCountingAtOnceAddUpExactlyOnceTheyAreDone() throws Exception {
        int threads = 4;
        int rounds = 20_000;
        int held = 3;
        CountDownLatch start = new CountDownLatch(1);
        List<Thread> workers = new ArrayList<>();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        for (int t = 0; t < threads; t++) {
            long size = 512L * (t + 1);
            workers.add(Thread.ofPlatform().start(() -> {
                try {
                    start.await();
                    for (int i = 0; i < rounds; i++) {
                        for (int b = 0; b < held; b++) {
                            counters.allocated(size, size);
                        }
                        counters.read(); // a reader meanwhile sees figures within their bounds
                        for (int b = 0; b < held; b++) {
                            counters.freed(size, size);
                        }
                    }
                    counters.allocated(size, size); // one left live per thread
                } catch (Throwable e) {
                    failure.set(e);
                }
            }));
        }
        start.countDown();
        for (Thread worker : workers) {
            worker.join(30_000);
        }

        assertThat(failure.get()).isNull();
        StatisticsResource.Counts figures = counters.read();
        long leftLive = 512L * (1 + 2 + 3 + 4);
        assertThat(figures.allocatedBytes()).isEqualTo(leftLive);
        assertThat(figures.requestedBytes()).isEqualTo(leftLive);
        assertThat(figures.liveBlocks()).isEqualTo(threads);
        assertThat(figures.allocations()).isEqualTo((long) threads * (rounds * held + 1));
        assertThat(figures.allocatedBytesPeak()).as("at most every thread's blocks at once")
                .isBetween(held * 512L * 4, held * leftLive);
    }
}
