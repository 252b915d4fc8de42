package dev.compute.memory;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.resource.Block;
import dev.compute.memory.resource.MemoryResource;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import dev.compute.memory.testing.LogCapture;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Frees the memory resource refuses (an application's adaptor that throws from its free), and where they surface:
 * what ends, releases or frees on behalf of others goes on with the rest, and tells of the failure without throwing
 * it into a caller whose own call it was not.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class RefusedFreesTest {

    private final SimulatedDiscreteBackend device = new SimulatedDiscreteBackend();
    private final AtomicBoolean refusing = new AtomicBoolean();

    private UnifiedMemoryManagerBuilder refusingWhenAsked() {
        return UnifiedMemoryManager.builder().backend(device)
                .resourceAdaptor((upstream, location) -> new RefusingFree(upstream, refusing))
                .timelineInterval(Duration.ZERO).trimInterval(Duration.ZERO);
    }

    @Test
    void aCloseInWhichAViewsReleaseIsRefusedStillEndsEveryViewAndFreesThePools() throws Exception {
        UnifiedMemoryManager manager = refusingWhenAsked().build();
        UnifiedBuffer first = manager.allocate(4096, MemoryLocation.HOST);
        UnifiedBuffer second = manager.allocate(4096, MemoryLocation.HOST);
        MemorySegment firstView = first.hostView();
        MemorySegment secondView = second.hostView();
        closeOnAnotherThread(first);
        closeOnAnotherThread(second);
        assertThat(manager.statistics(MemoryLocation.HOST).heldBuffers()).as("held by this thread's views").isEqualTo(2);
        refusing.set(true);

        try (LogCapture log = LogCapture.managerLog()) {
            manager.close();

            assertThatThrownBy(() -> firstView.get(ValueLayout.JAVA_BYTE, 0)).isInstanceOf(IllegalStateException.class);
            assertThatThrownBy(() -> secondView.get(ValueLayout.JAVA_BYTE, 0)).as("the view after the refused one ended too")
                    .isInstanceOf(IllegalStateException.class);
            assertThat(device.liveAllocations()).as("the pools are freed").isZero();
            assertThat(log.atLeast(Level.WARNING)).as("the refusal is told").extracting(RefusedFreesTest::thrownMessage)
                    .contains("the adaptor refuses this free");
        }
    }

    @Test
    void aRefusedReleaseOfADeadThreadsViewsIsToldNotThrownFromAnotherThreadsView() throws Exception {
        try (UnifiedMemoryManager manager = refusingWhenAsked().build(); LogCapture log = LogCapture.managerLog()) {
            List<UnifiedBuffer> viewed = new CopyOnWriteArrayList<>();
            CountDownLatch viewing = new CountDownLatch(1);
            CountDownLatch end = new CountDownLatch(1);
            Thread viewer = Thread.ofPlatform().name("views-then-ends").start(() -> {
                for (int i = 0; i < 2; i++) {
                    UnifiedBuffer buffer = manager.allocate(4096, MemoryLocation.HOST);
                    buffer.hostView().fill((byte) 1); // allocated and viewed here alone: a confined view
                    viewed.add(buffer);
                }
                viewing.countDown();
                awaitQuietly(end);
            });
            viewing.await();
            viewed.forEach(UnifiedBuffer::close); // handed to the viewer, which ends without calling in again
            refusing.set(true);
            end.countDown();
            viewer.join();

            // enough threads taking their first view that one of them sweeps the dead viewer's views
            List<Throwable> failures = new CopyOnWriteArrayList<>();
            List<UnifiedBuffer> theirs = new CopyOnWriteArrayList<>();
            List<Thread> viewers = new ArrayList<>();
            for (int i = 0; i < 40; i++) {
                viewers.add(Thread.ofPlatform().start(() -> {
                    try {
                        UnifiedBuffer own = manager.allocate(4096, MemoryLocation.HOST);
                        theirs.add(own);
                        own.hostView().fill((byte) 2);
                    } catch (Throwable e) {
                        failures.add(e);
                    }
                }));
            }
            for (Thread thread : viewers) {
                thread.join();
            }
            while (manager.statistics(MemoryLocation.HOST).heldBuffers() > 0) { // or the sweeper dropped them
                Thread.sleep(10);
            }
            refusing.set(false);
            theirs.forEach(UnifiedBuffer::close);

            assertThat(failures).as("no view fails for a free of another thread's buffer").isEmpty();
            assertThat(log.atLeast(Level.WARNING)).as("the refusal is told").extracting(RefusedFreesTest::thrownMessage)
                    .contains("the adaptor refuses this free");
        }
    }

    private static void awaitQuietly(CountDownLatch latch) {
        try {
            latch.await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static @Nullable String thrownMessage(LogRecord record) {
        return record.getThrown() == null ? null : record.getThrown().getMessage();
    }

    private static void closeOnAnotherThread(UnifiedBuffer buffer) throws InterruptedException {
        Thread.ofPlatform().start(buffer::close).join();
    }

    /** Passes everything through, but throws from a free (after giving the block back) while {@code refusing}. */
    private record RefusingFree(MemoryResource upstream, AtomicBoolean refusing) implements MemoryResource {
        @Override
        public Block allocate(long bytes) {
            return upstream.allocate(bytes);
        }

        @Override
        public @Nullable List<Block> allocateAdjacent(long[] bytes) {
            return upstream.allocateAdjacent(bytes);
        }

        @Override
        public void deallocate(Block block, CompletableFuture<?> inFlight) {
            upstream.deallocate(block, inFlight);
            if (refusing.get()) {
                throw new IllegalStateException("the adaptor refuses this free");
            }
        }

        @Override
        public void close() {
            upstream.close();
        }
    }
}
