package dev.compute.memory;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import dev.compute.memory.testing.ForwardingResource;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;

/** A view scope's end, as the application sees it: what it ends, and where the thread is afterwards. */
class ViewScopeTest {

    @Test
    void aScopeWhoseEndFailsToFreeStillEndsEveryViewAndLeavesTheThreadOutsideIt() throws Exception {
        AtomicBoolean refusing = new AtomicBoolean();
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend())
                .resourceAdaptor((upstream, location) -> ForwardingResource.refusingFrees(upstream, block -> refusing.get() ? new IllegalStateException("the adaptor refuses this free") : null))
                .timelineInterval(Duration.ZERO).trimInterval(Duration.ZERO).build()) {
            UnifiedBuffer outerViewed = manager.allocate(4096, MemoryLocation.HOST);
            UnifiedBuffer innerViewed = manager.allocate(4096, MemoryLocation.HOST);
            UnifiedBuffer open = manager.allocate(4096, MemoryLocation.HOST);
            ViewScope outer = ViewScope.open();
            outerViewed.hostView().fill((byte) 1);
            MemorySegment ofTheOpenBuffer = open.hostView();
            ViewScope.open(); // an inner scope left open: it ends with the outer one
            innerViewed.hostView().fill((byte) 2);
            closeOnAnotherThread(outerViewed);
            closeOnAnotherThread(innerViewed);
            assertThat(manager.statistics(MemoryLocation.HOST).heldBuffers()).as("waiting for the scope's views").isEqualTo(2);
            refusing.set(true);

            assertThatThrownBy(outer::close).isInstanceOf(IllegalStateException.class).hasMessage("the adaptor refuses this free");

            refusing.set(false);
            assertThat(manager.statistics(MemoryLocation.HOST).heldBuffers()).as("every view of the scope ended").isZero();
            assertThatThrownBy(() -> ofTheOpenBuffer.get(ValueLayout.JAVA_BYTE, 0)).as("the outer scope's view of an open buffer too")
                    .isInstanceOf(IllegalStateException.class);
            UnifiedBuffer another = manager.allocate(4096, MemoryLocation.HOST);
            CompletableFuture.runAsync(another::hostView).get(); // used elsewhere: a view outside any scope here is shared
            another.hostView().fill((byte) 3);
            closeOnAnotherThread(another);
            assertThat(manager.statistics(MemoryLocation.HOST).heldBuffers())
                    .as("out of the scope, a view of a buffer closed elsewhere holds nothing").isZero();
            open.close();
        }
    }

    private static void closeOnAnotherThread(UnifiedBuffer buffer) throws InterruptedException {
        Thread.ofPlatform().start(buffer::close).join();
    }
}
