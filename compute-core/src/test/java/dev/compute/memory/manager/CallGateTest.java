package dev.compute.memory.manager;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.AccessMode;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.ViewScope;
import dev.compute.memory.lifetime.BufferCore;
import dev.compute.memory.lifetime.BufferViews;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The manager's one door: calls under way hold a close until they leave (bounded), a closed manager refuses calls on
 * its buffers and does not count them, a thread told it is closed loses its views, and scopes handed to a thread end
 * on its way in. Buffers here are cores of a {@link ManagerParts} over the simulated device, whose gate is the one tested.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class CallGateTest {

    private final ManagerParts parts = ManagerParts.on(new SimulatedDiscreteBackend()).build();
    private final CallGate gate = parts.gate;

    @AfterEach
    void close() {
        parts.close();
    }

    private static long in(long millis) {
        return System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(millis);
    }

    private static boolean ended(MemorySegment view) {
        try {
            view.get(ValueLayout.JAVA_BYTE, 0);
            return false;
        } catch (IllegalStateException e) {
            return true;
        }
    }

    @Test
    void aCallUnderWayHoldsTheCloseUntilItLeavesAndTheWaitIsBounded() throws Exception {
        CountDownLatch inside = new CountDownLatch(1);
        CountDownLatch leave = new CountDownLatch(1);
        Thread caller = Thread.ofPlatform().start(() -> {
            int call = gate.enter();
            inside.countDown();
            try {
                leave.await(10, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            gate.exit(call);
        });
        assertThat(inside.await(10, TimeUnit.SECONDS)).isTrue();

        assertThat(gate.close()).isTrue();
        long start = System.nanoTime();
        assertThat(gate.awaitCalls(in(100))).isFalse();
        assertThat(System.nanoTime() - start).as("waited until the deadline").isGreaterThanOrEqualTo(TimeUnit.MILLISECONDS.toNanos(90));

        leave.countDown();
        assertThat(gate.awaitCalls(in(10_000))).isTrue();
        caller.join(10_000);
    }

    @Test
    void aManagerIsClosedOnceWhoeverClosesItAtTheSameTime() throws Exception {
        int threads = 8;
        CyclicBarrier start = new CyclicBarrier(threads);
        AtomicInteger firsts = new AtomicInteger();
        List<Thread> closers = new ArrayList<>();
        for (int i = 0; i < threads; i++) {
            closers.add(Thread.ofPlatform().start(() -> {
                try {
                    start.await(10, TimeUnit.SECONDS);
                } catch (Exception e) {
                    throw new AssertionError(e);
                }
                if (gate.close()) {
                    firsts.incrementAndGet();
                }
            }));
        }
        for (Thread closer : closers) {
            closer.join(10_000);
        }

        assertThat(firsts).hasValue(1);
        assertThat(gate.isClosed()).isTrue();
        assertThat(gate.close()).isFalse();
    }

    @Test
    void aCallOnABufferOfAClosedManagerIsRefusedInItsWordsAndNotCounted() {
        BufferCore buffer = parts.buffer(MemoryLocation.DEVICE, 64);
        int before = gate.enter(buffer);
        gate.exit(before);
        gate.close();

        assertThatThrownBy(() -> gate.enter(buffer)).isInstanceOf(IllegalStateException.class)
                .hasMessage("UnifiedBuffer[DEVICE, 64 bytes, INT8] is closed because its UnifiedMemoryManager was closed");
        assertThat(gate.awaitCalls(System.nanoTime())).as("the refused call is not under way").isTrue();
        assertThat(CallGate.closedManager()).hasMessage("this UnifiedMemoryManager is closed");
    }

    @Test
    void callsThatMustFinishAreCountedOnAClosedManagerAndLeaveTheViewsAlone() {
        BufferCore buffer = parts.buffer(MemoryLocation.HOST, 64);
        MemorySegment view = BufferViews.view(buffer, AccessMode.READ);
        gate.close();

        int end = gate.enterAlways();
        assertThat(gate.awaitCalls(System.nanoTime())).as("counted in").isFalse();
        gate.exitQuietly(end);
        assertThat(gate.awaitCalls(System.nanoTime())).isTrue();
        assertThat(ended(view)).isFalse();

        gate.exit(gate.enterAlways());
        assertThat(ended(view)).as("a call the close overtook leaves the thread without views").isTrue();
    }

    @Test
    void aThreadToldTheManagerIsClosedLosesItsViewsWhicheverDoorItTakes() throws Exception {
        BufferCore buffer = parts.buffer(MemoryLocation.HOST, 64);
        CountDownLatch viewsTaken = new CountDownLatch(2);
        CountDownLatch closed = new CountDownLatch(1);
        AtomicReference<Object> managersCall = new AtomicReference<>();
        AtomicReference<Object> buffersCall = new AtomicReference<>();
        // views in view scopes: each thread's own (confined), which only it can end, as a request's are
        Thread allocating = Thread.ofPlatform().start(() -> {
            try (ViewScope scope = ViewScope.open()) {
                MemorySegment view = BufferViews.view(buffer, AccessMode.READ);
                viewsTaken.countDown();
                await(closed);
                try {
                    gate.enter();
                    managersCall.set("not refused");
                } catch (IllegalStateException refused) {
                    managersCall.set(ended(view));
                }
            }
        });
        Thread copying = Thread.ofPlatform().start(() -> {
            try (ViewScope scope = ViewScope.open()) {
                MemorySegment view = BufferViews.view(buffer, AccessMode.READ);
                viewsTaken.countDown();
                await(closed);
                try {
                    gate.enter(buffer);
                    buffersCall.set("not refused");
                } catch (IllegalStateException refused) {
                    buffersCall.set(ended(view));
                }
            }
        });
        assertThat(viewsTaken.await(10, TimeUnit.SECONDS)).isTrue();

        gate.close();
        closed.countDown();
        allocating.join(10_000);
        copying.join(10_000);

        assertThat(managersCall.get()).isEqualTo(true);
        assertThat(buffersCall.get()).isEqualTo(true);
        assertThat(gate.scopes().openScopes()).isZero();
    }

    @Test
    void scopesHandedToAThreadEndOnItsWayInAndTheirBufferGoesBack() throws Exception {
        AtomicReference<BufferCore> allocated = new AtomicReference<>();
        CountDownLatch viewTaken = new CountDownLatch(1);
        CountDownLatch callIn = new CountDownLatch(1);
        AtomicReference<Boolean> viewEnded = new AtomicReference<>();
        Thread viewer = Thread.ofPlatform().start(() -> {
            BufferCore own = parts.buffer(MemoryLocation.HOST, 64);
            allocated.set(own);
            // outside any view scope, on the allocating thread: the view is the thread's own until its next call
            MemorySegment view = BufferViews.view(own, AccessMode.READ);
            viewTaken.countDown();
            await(callIn);
            gate.exit(gate.enter());
            viewEnded.set(ended(view));
        });
        assertThat(viewTaken.await(10, TimeUnit.SECONDS)).isTrue();

        allocated.get().close(); // on this thread: the viewer's view is handed to it
        assertThat(parts.figures.statistics(MemoryLocation.HOST).liveBuffers()).as("closed, so not live").isZero();
        assertThat(parts.figures.statistics(MemoryLocation.HOST).heldBuffers()).as("the view holds the memory").isEqualTo(1);
        callIn.countDown();
        viewer.join(10_000);

        assertThat(viewEnded.get()).isTrue();
        assertThat(parts.figures.statistics(MemoryLocation.HOST).liveBuffers()).isZero();
        assertThat(parts.figures.statistics(MemoryLocation.HOST).heldBuffers()).as("back as the view ended").isZero();
    }

    private static void await(CountDownLatch latch) {
        try {
            assertThat(latch.await(10, TimeUnit.SECONDS)).isTrue();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
