package dev.compute.memory.internal;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.CompactionReport;
import dev.compute.memory.MemoryEventListener;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.OutOfMemoryReason;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class SafeEventListenerTest {

    /** Throws what it is given on every event, after noting it. */
    private static final class Throwing implements MemoryEventListener {
        final List<String> heard = new ArrayList<>();
        final Throwable thrown;

        Throwing(Throwable thrown) {
            this.thrown = thrown;
        }

        private void fail(String event) {
            heard.add(event);
            if (thrown instanceof RuntimeException e) {
                throw e;
            }
            throw (Error) thrown;
        }

        @Override
        public void backendAllocated(MemoryLocation location, long bytes, long nanos) {
            fail("allocated");
        }

        @Override
        public void allocationFailed(MemoryLocation location, long requestedBytes, OutOfMemoryReason reason) {
            fail("failed");
        }

        @Override
        public void compacted(CompactionReport report) {
            fail("compacted");
        }
    }

    @Test
    void everyListenerHearsEveryEventWhateverTheOthersThrow() {
        Throwing assertion = new Throwing(new AssertionError("a test's listener"));
        Throwing unchecked = new Throwing(new IllegalStateException("a bug"));
        Throwing outOfMemory = new Throwing(new OutOfMemoryError("heap"));
        MemoryEventListener all = SafeEventListener.of(List.of(assertion, unchecked, outOfMemory));

        all.backendAllocated(MemoryLocation.DEVICE, 1, 1);
        all.allocationFailed(MemoryLocation.HOST, 2, OutOfMemoryReason.POOL_LIMIT);

        for (Throwing listener : List.of(assertion, unchecked, outOfMemory)) {
            assertThat(listener.heard).containsExactly("allocated", "failed");
        }
    }

    @Test
    void noListenersCostNothingAndAGuardedOneIsNotGuardedTwice() {
        assertThat(SafeEventListener.of(List.of())).isSameAs(MemoryEventListener.NONE);
        assertThat(SafeEventListener.guard(MemoryEventListener.NONE)).isSameAs(MemoryEventListener.NONE);
        MemoryEventListener guarded = SafeEventListener.guard(new Throwing(new AssertionError()));
        assertThat(guarded).isInstanceOf(SafeEventListener.class);
        assertThat(SafeEventListener.guard(guarded)).isSameAs(guarded);
        guarded.backendAllocated(MemoryLocation.DEVICE, 1, 1);
    }
}
