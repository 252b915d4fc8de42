package dev.compute.memory.manager;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.compute.memory.internal.ThreadStripes;
import java.util.concurrent.atomic.AtomicIntegerArray;
import org.junit.jupiter.api.Test;

class ActiveCallsTest {

    @Test
    void aThreadEnteringAStripeAnotherCallIsInMovesToAnotherStripe() throws InterruptedException {
        assumeTrue(ThreadStripes.COUNT > 1, "one processor, one stripe: nowhere to move");
        ActiveCalls calls = new ActiveCalls();
        int held = calls.enter(); // this thread stays inside a call on its stripe
        int heldStripe = ThreadStripes.ofCurrentThread();
        // [0]: 1 once a thread on the held stripe entered, [1]: whether its call was counted, [2]: its stripe afterwards
        AtomicIntegerArray seen = new AtomicIntegerArray(new int[] {0, 0, -1});
        for (int tries = 0; tries < 10_000 && seen.get(0) == 0; tries++) {
            Thread other = Thread.ofPlatform().start(() -> {
                if (ThreadStripes.ofCurrentThread() == heldStripe) {
                    int entered = calls.enter();
                    calls.exit(held); // the held call leaves: only the other thread's call is left to count
                    seen.set(1, calls.any() ? 1 : 0);
                    calls.exit(entered);
                    seen.set(2, ThreadStripes.ofCurrentThread());
                    seen.set(0, 1);
                }
            });
            other.join();
        }

        assertThat(seen.get(0)).as("a thread on the busy stripe was found").isEqualTo(1);
        assertThat(seen.get(1)).as("its call was counted though its stripe was taken").isEqualTo(1);
        assertThat(seen.get(2)).as("having found the stripe in use, it moved").isNotEqualTo(heldStripe);
        assertThat(calls.any()).isFalse();
    }

    @Test
    void aCallInsideACallOfTheSameThreadIsCountedAndDoesNotMoveTheThread() {
        ActiveCalls calls = new ActiveCalls();
        int stripe = ThreadStripes.ofCurrentThread();
        int outer = calls.enter();
        int inner = calls.enter();
        calls.exit(outer);
        assertThat(calls.any()).as("the inner call is still counted").isTrue();
        calls.exit(inner);
        assertThat(calls.any()).isFalse();
        assertThat(ThreadStripes.ofCurrentThread()).isEqualTo(stripe);
    }

    @Test
    void aLoneThreadStaysOnItsStripe() {
        ActiveCalls calls = new ActiveCalls();
        int first = calls.enter();
        calls.exit(first);
        int second = calls.enter();
        calls.exit(second);
        assertThat(second).isEqualTo(first);
        assertThat(calls.any()).isFalse();
    }
}
