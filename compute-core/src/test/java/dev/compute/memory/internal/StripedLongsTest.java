package dev.compute.memory.internal;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Sixteen counters per thread stripe: each cell its own (no two stripes or fields share one, the last field of a stripe
 * included), sums over the stripes exact once no thread adds, and the atomic steps a caller builds on (compare-and-
 * exchange, release stores) as their names say, from many threads at once.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class StripedLongsTest {

    private static final int FIELDS = 16;

    @Test
    void everyStripesEveryFieldIsACellOfItsOwn() {
        StripedLongs longs = new StripedLongs();
        for (int stripe = 0; stripe < ThreadStripes.COUNT; stripe++) {
            for (int field = 0; field < FIELDS; field++) {
                longs.addAt(stripe, field, 1 + stripe * FIELDS + field);
            }
        }

        for (int stripe = 0; stripe < ThreadStripes.COUNT; stripe++) {
            for (int field = 0; field < FIELDS; field++) {
                assertThat(longs.get(stripe, field)).as("stripe %d, field %d", stripe, field).isEqualTo(1 + stripe * FIELDS + field);
            }
        }
        long lastFields = 0;
        for (int stripe = 0; stripe < ThreadStripes.COUNT; stripe++) {
            lastFields += 1 + stripe * FIELDS + (FIELDS - 1);
        }
        assertThat(longs.sum(FIELDS - 1)).isEqualTo(lastFields);
    }

    @Test
    void aThreadAddsToItsOwnStripeAndTheSumSeesEveryStripe() {
        StripedLongs longs = new StripedLongs();
        int mine = ThreadStripes.ofCurrentThread();

        assertThat(longs.add(2, 5)).as("the stripe's new value").isEqualTo(5);
        assertThat(longs.add(2, -2)).isEqualTo(3);
        int other = (mine + 1) % ThreadStripes.COUNT;
        longs.addAt(other, 2, 10);

        assertThat(longs.get(mine, 2)).isEqualTo(other == mine ? 13 : 3);
        assertThat(longs.sum(2)).isEqualTo(13);
        assertThat(longs.sum(3)).isZero();
        assertThat(longs.anyNonZero(2)).isTrue();
        assertThat(longs.anyNonZero(3)).isFalse();
        longs.addAt(other, 2, -10);
        longs.addAt(mine, 2, -3);
        assertThat(longs.anyNonZero(2)).isFalse();
    }

    @Test
    void compareAndExchangeSetsOnlyWhatItExpectsAndSaysWhatItFound() {
        StripedLongs longs = new StripedLongs();
        int stripe = ThreadStripes.COUNT - 1;

        assertThat(longs.compareAndExchange(stripe, 4, 0, 42)).isZero();
        assertThat(longs.compareAndExchange(stripe, 4, 0, 7)).as("not 0 any more: unchanged").isEqualTo(42);
        assertThat(longs.get(stripe, 4)).isEqualTo(42);
        longs.setRelease(stripe, 4, 0);
        assertThat(longs.get(stripe, 4)).isZero();
        longs.setOpaque(stripe, 5, 9);
        assertThat(longs.get(stripe, 5)).isEqualTo(9);
        assertThat(longs.sum(5)).isEqualTo(9);
    }

    @Test
    void addsFromManyThreadsAtOnceAreAllCounted() throws Exception {
        StripedLongs longs = new StripedLongs();
        int threads = 4;
        int adds = 100_000;
        CountDownLatch start = new CountDownLatch(1);
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            workers.add(Thread.ofPlatform().start(() -> {
                awaitQuietly(start);
                for (int i = 0; i < adds; i++) {
                    longs.add(0, 1);
                    longs.addAt(0, 1, 1); // one stripe for all: contended
                }
            }));
        }
        start.countDown();
        for (Thread worker : workers) {
            worker.join(30_000);
        }

        assertThat(longs.sum(0)).isEqualTo((long) threads * adds);
        assertThat(longs.get(0, 1)).isEqualTo((long) threads * adds);
    }

    @Test
    void onlyOneOfManyThreadsClaimsAFreeCell() throws Exception {
        StripedLongs longs = new StripedLongs();
        int threads = 8;
        AtomicInteger claims = new AtomicInteger();
        CountDownLatch start = new CountDownLatch(1);
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            long self = t + 1;
            workers.add(Thread.ofPlatform().start(() -> {
                awaitQuietly(start);
                if (longs.compareAndExchange(0, 0, 0, self) == 0) {
                    claims.incrementAndGet();
                }
            }));
        }
        start.countDown();
        for (Thread worker : workers) {
            worker.join(10_000);
        }

        assertThat(claims).hasValue(1);
        assertThat(longs.get(0, 0)).isBetween(1L, (long) threads);
    }

    private static void awaitQuietly(CountDownLatch latch) {
        try {
            latch.await(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
