package dev.compute.memory;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.resource.Block;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import dev.compute.memory.spi.ComputeBackend;
import dev.compute.memory.testing.ForwardingResource;
import dev.compute.memory.testing.LogCapture;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
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
    /** The size of the blocks whose frees the adaptor refuses; 0: none. */
    private final AtomicLong refusing = new AtomicLong();
    /** What the adaptor throws when it refuses, the same object each time; null: a new exception each time. */
    private final AtomicReference<@Nullable RuntimeException> refusal = new AtomicReference<>();
    /** Whether the adaptor refuses with a checked exception, thrown past the compiler (as Kotlin code may). */
    private final AtomicBoolean checkedRefusal = new AtomicBoolean();

    private UnifiedMemoryManagerBuilder refusingWhenAsked() {
        return UnifiedMemoryManager.builder().backend(device)
                .resourceAdaptor((upstream, location) -> ForwardingResource.refusingFrees(upstream, this::refusalOf))
                .timelineInterval(Duration.ZERO).trimInterval(Duration.ZERO);
    }

    /** What the adaptor throws from the free of {@code block}: null where it does not refuse it. */
    private @Nullable Throwable refusalOf(Block block) {
        if (block.requestedSize() != refusing.get()) {
            return null;
        }
        if (checkedRefusal.get()) {
            return new IOException("the adaptor refuses this free, checked");
        }
        RuntimeException same = refusal.get();
        return same != null ? same : new IllegalStateException("the adaptor refuses this free");
    }

    @Test
    void aCheckedExceptionAnAdaptorThrowsFromAFreeIsNotLost() {
        try (UnifiedMemoryManager manager = refusingWhenAsked().build()) {
            UnifiedBuffer buffer = manager.allocate(4096, MemoryLocation.DEVICE);
            refusing.set(4096);
            checkedRefusal.set(true);

            assertThatThrownBy(buffer::close).isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("the memory resource failed to free a block").hasCauseInstanceOf(IOException.class);
            refusing.set(0);
        }
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
        refusing.set(4096);

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
            refusing.set(4096);
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
            refusing.set(0);
            theirs.forEach(UnifiedBuffer::close);

            assertThat(failures).as("no view fails for a free of another thread's buffer").isEmpty();
            assertThat(log.atLeast(Level.WARNING)).as("the refusal is told").extracting(RefusedFreesTest::thrownMessage)
                    .contains("the adaptor refuses this free");
        }
    }

    @Test
    void aRefusedReleaseOfAViewHandedToAThreadIsToldNotThrownFromThatThreadsNextCall() throws Exception {
        try (UnifiedMemoryManager manager = refusingWhenAsked().build(); LogCapture log = LogCapture.managerLog()) {
            UnifiedBuffer itsOwn = manager.allocate(4096, MemoryLocation.HOST);
            AtomicReference<UnifiedBuffer> viewedThere = new AtomicReference<>();
            CountDownLatch viewed = new CountDownLatch(1);
            CountDownLatch closedHere = new CountDownLatch(1);
            List<Throwable> failures = new CopyOnWriteArrayList<>();
            Thread viewer = Thread.ofPlatform().start(() -> {
                try {
                    UnifiedBuffer allocatedThere = manager.allocate(8192, MemoryLocation.HOST);
                    allocatedThere.hostView().fill((byte) 1); // outside any view scope, on the allocating thread: confined
                    viewedThere.set(allocatedThere);
                    viewed.countDown();
                    closedHere.await();
                    itsOwn.close(); // ends the view handed to it on the way in
                    manager.allocate(4096, MemoryLocation.HOST).close();
                } catch (Throwable e) {
                    failures.add(e);
                }
            });
            viewed.await();
            refusing.set(8192);
            viewedThere.get().close(); // handed to the viewer, whose next call ends it
            closedHere.countDown();
            viewer.join();
            refusing.set(0);

            assertThat(failures).as("the viewer's calls fail for no free of theirs").isEmpty();
            assertThat(itsOwn.isClosed()).isTrue();
            assertThat(manager.statistics(MemoryLocation.HOST).heldBuffers()).isZero();
            assertThat(log.atLeast(Level.WARNING)).as("the refusal is told").extracting(RefusedFreesTest::thrownMessage)
                    .contains("the adaptor refuses this free");
        }
    }

    @Test
    void aLeakWhoseFreeIsRefusedIsStillToldToTheListenersAndTheRefusalLogged() throws Exception {
        AtomicLong leaksHeard = new AtomicLong();
        MemoryEventListener leaks = new MemoryEventListener() {
            @Override
            public void leakDetected(MemoryLocation location, long bytes, @Nullable String allocationSite) {
                leaksHeard.incrementAndGet();
            }
        };
        try (LogCapture log = LogCapture.managerLog();
             UnifiedMemoryManager manager = refusingWhenAsked().leakDetection(LeakDetectionLevel.PARANOID).eventListener(leaks).build()) {
            refusing.set(4096);
            leak(manager);
            for (int i = 0; i < 200 && manager.leaksDetected() == 0; i++) {
                System.gc();
                Thread.sleep(20);
            }
            refusing.set(0);

            assertThat(manager.leaksDetected()).isEqualTo(1);
            assertThat(leaksHeard).as("the listeners hear of the leak, as leaksDetected() counts it").hasValue(1);
            assertThat(log.atLeast(Level.WARNING)).as("the refusal is told").extracting(RefusedFreesTest::thrownMessage)
                    .contains("the adaptor refuses this free");
        }
    }

    @Test
    void aBudgetWhoseFreesAreRefusedWithOneExceptionObjectStillClosesEveryBuffer() {
        IllegalStateException sameEachTime = new IllegalStateException("the adaptor refuses this free");
        refusal.set(sameEachTime); // as an adaptor that keeps one exception to throw, stack trace and all
        try (UnifiedMemoryManager manager = refusingWhenAsked().build(); LogCapture log = LogCapture.managerLog()) {
            MemoryBudget budget = manager.budget("tenant", 1L << 20);
            AtomicBoolean toldClosed = new AtomicBoolean();
            budget.whenClosed(() -> toldClosed.set(true));
            List<UnifiedBuffer> buffers = List.of(budget.allocate(4096, MemoryLocation.HOST), budget.allocate(4096, MemoryLocation.HOST),
                    budget.allocate(4096, MemoryLocation.HOST));
            refusing.set(4096);

            assertThatThrownBy(budget::close).as("what the buffers' closes threw").isSameAs(sameEachTime);

            refusing.set(0);
            assertThat(buffers).allMatch(UnifiedBuffer::isClosed);
            assertThat(toldClosed).as("the budget's close finished").isTrue();
            assertThat(manager.statistics(MemoryLocation.HOST).liveBuffers()).isZero();
        }
    }

    @Test
    void aRefusedReleaseOfABufferClosedDuringACopyIsToldNotThrownFromTheCopy() throws Exception {
        CountDownLatch copying = new CountDownLatch(1);
        CountDownLatch closed = new CountDownLatch(1);
        ComputeBackend heldCopies = (ComputeBackend) Proxy.newProxyInstance(ComputeBackend.class.getClassLoader(),
                new Class<?>[] {ComputeBackend.class}, (proxy, method, args) -> {
                    if (method.getName().equals("copyToDevice") && copying.getCount() > 0) {
                        copying.countDown();
                        closed.await(10, TimeUnit.SECONDS); // the source is closed meanwhile, on the test's thread
                    }
                    try {
                        return method.invoke(device, args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
        try (UnifiedMemoryManager manager = refusingWhenAsked().backend(heldCopies).build(); LogCapture log = LogCapture.managerLog()) {
            UnifiedBuffer source = manager.allocate(8192, MemoryLocation.HOST);
            UnifiedBuffer target = manager.allocate(4096 * 3, MemoryLocation.DEVICE);
            CompletableFuture<Void> copy = CompletableFuture.runAsync(() -> target.copyFrom(source, 0, 0, 8192));
            copying.await();
            refusing.set(8192);
            source.close(); // its memory waits for the copy, whose end gives it back
            closed.countDown();

            assertThatCode(copy::join).as("the copy did what it was asked").doesNotThrowAnyException();
            refusing.set(0);
            assertThat(manager.statistics(MemoryLocation.HOST).heldBuffers()).isZero();
            assertThat(log.atLeast(Level.WARNING)).as("the refusal is told").extracting(RefusedFreesTest::thrownMessage)
                    .contains("the adaptor refuses this free");
            target.close();
        }
    }

    @SuppressWarnings("resource")
    private static void leak(UnifiedMemoryManager manager) {
        manager.allocate(4096, MemoryLocation.HOST).copyFrom(new byte[] {1});
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
}
