package dev.compute.memory.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.atomic.AtomicIntegerArray;
import org.junit.jupiter.api.Test;

/**
 * Which stripe a thread uses: a power of two of them, more than the processors, a thread's stripe stable until it is
 * found contended, then another one at random, and two threads whose ids fall in one bucket always on the same stripe,
 * so that one move separates a thread from another in every striped structure.
 */
class ThreadStripesTest {

    private static final int PROCESSORS = Runtime.getRuntime().availableProcessors();

    @Test
    void thereAreAPowerOfTwoStripesFromTwiceToFourTimesTheProcessorsAtMost64() {
        assertThat(Integer.bitCount(ThreadStripes.COUNT)).isEqualTo(1);
        assertThat(ThreadStripes.COUNT).isBetween(1, 64);
        assertThat(ThreadStripes.COUNT).isGreaterThanOrEqualTo(Math.min(64, 2 * PROCESSORS));
        assertThat(ThreadStripes.COUNT).isLessThan(Math.max(2, 4 * PROCESSORS));
    }

    @Test
    void aThreadKeepsItsStripeUntilItIsFoundContendedThenMovesToAnother() {
        assumeTrue(ThreadStripes.COUNT > 1, "one stripe: nowhere to move");
        int stripe = ThreadStripes.ofCurrentThread();
        assertThat(stripe).isBetween(0, ThreadStripes.COUNT - 1);
        assertThat(ThreadStripes.ofCurrentThread()).isEqualTo(stripe);
        assertThat(ThreadStripes.of(Thread.currentThread().threadId())).as("by the thread's id").isEqualTo(stripe);

        Set<Integer> visited = new HashSet<>();
        for (int move = 0; move < 200; move++) {
            int before = ThreadStripes.ofCurrentThread();
            ThreadStripes.contended();
            int after = ThreadStripes.ofCurrentThread();
            assertThat(after).as("move %d", move).isNotEqualTo(before).isBetween(0, ThreadStripes.COUNT - 1);
            visited.add(after);
        }
        assertThat(visited).as("moved at random, not in step").hasSizeGreaterThan(Math.min(2, ThreadStripes.COUNT - 1));
    }

    @Test
    void threadsWhoseIdsShareABucketShareAStripeAndMoveTogether() throws Exception {
        assumeTrue(ThreadStripes.COUNT > 1, "one stripe: nowhere to move");
        // [0]: the first thread's stripe, [1]: its stripe after it was found contended, [2]: the second thread's stripe
        AtomicIntegerArray seen = new AtomicIntegerArray(3);
        Thread first = Thread.ofPlatform().unstarted(() -> {
            seen.set(0, ThreadStripes.ofCurrentThread());
            ThreadStripes.contended();
            seen.set(1, ThreadStripes.ofCurrentThread());
        });
        Thread second = null;
        for (int i = 0; i < 5_000 && second == null; i++) {
            Thread candidate = Thread.ofPlatform().unstarted(() -> seen.set(2, ThreadStripes.ofCurrentThread()));
            if ((candidate.threadId() - first.threadId()) % 1024 == 0) {
                second = candidate;
            }
        }
        assertThat(second).as("a thread whose id is a multiple of 1024 away").isNotNull();

        first.start();
        first.join(10_000);
        second.start();
        second.join(10_000);

        assertThat(seen.get(1)).isNotEqualTo(seen.get(0));
        assertThat(seen.get(2)).as("the other thread of the bucket moved with it").isEqualTo(seen.get(1));
        assertThat(ThreadStripes.of(first.threadId())).as("the stripe found by the id after the move").isEqualTo(seen.get(1));
    }
}
