package dev.compute.memory;

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
        // [0]: the stripe the other thread entered by, [1]: its stripe afterwards; -1 until a thread on `held` is found
        AtomicIntegerArray seen = new AtomicIntegerArray(new int[] {-1, -1});
        for (int tries = 0; tries < 10_000 && seen.get(0) < 0; tries++) {
            Thread other = Thread.ofPlatform().start(() -> {
                if (ThreadStripes.ofCurrentThread() == held) {
                    int entered = calls.enter();
                    calls.exit(entered);
                    seen.set(1, ThreadStripes.ofCurrentThread());
                    seen.set(0, entered);
                }
            });
            other.join();
        }

        assertThat(seen.get(0)).as("a thread on the busy stripe was found and entered there").isEqualTo(held);
        assertThat(seen.get(1)).as("having found the stripe in use, it moved").isNotEqualTo(held);
        assertThat(calls.any()).as("this thread's call is still counted where it entered").isTrue();
        calls.exit(held);
        assertThat(calls.any()).isFalse();
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
