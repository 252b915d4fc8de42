package dev.compute.memory.lifetime;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.AccessMode;
import dev.compute.memory.BufferState;
import dev.compute.memory.DataType;
import dev.compute.memory.FileMapMode;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.ViewScope;
import dev.compute.memory.lifetime.BufferViews.Opened;
import dev.compute.memory.lifetime.BufferViews.Sharing;
import dev.compute.memory.lifetime.BufferViews.Side;
import dev.compute.memory.resource.Block;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import dev.compute.memory.testing.ControlledBackend;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.file.Path;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Views, host accesses and device accesses of a buffer on the simulated discrete device: each opens a scope whose
 * segments stop working when it ends, brings the copy it reaches up to date and marks the copy it writes newer; ending
 * a device access records the work its handle queued, and a shared access a native call still holds stays open.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class BufferViewsTest {

    private final SimulatedDiscreteBackend device = new SimulatedDiscreteBackend();
    private final ControlledBackend backend = new ControlledBackend(device);
    private final TestHost host = new TestHost(backend);

    private BufferCore deviceBuffer(int bytes) {
        return host.buffer(MemoryLocation.DEVICE, DataType.INT8, bytes);
    }

    @Test
    void aViewIsTheHostCopyForTheCallingThreadAndOneScopeServesAllItsViewsOfTheBuffer() {
        BufferCore root = deviceBuffer(64);

        MemorySegment read = BufferViews.view(root, AccessMode.READ);
        assertThat(read.isReadOnly()).isTrue();
        assertThat(root.state()).as("reading marks nothing").isEqualTo(BufferState.UNINITIALIZED);
        MemorySegment written = BufferViews.view(root, AccessMode.WRITE);
        assertThat(written.isReadOnly()).isFalse();
        assertThat(root.state()).isEqualTo(BufferState.HOST_ONLY);
        written.set(ValueLayout.JAVA_BYTE, 3, (byte) 42);

        assertThat(read.get(ValueLayout.JAVA_BYTE, 3)).as("one host copy").isEqualTo((byte) 42);
        assertThat(host.mirrors).as("the mirror is made once").hasValue(1);
        assertThat(host.scopes.openScopes()).as("views on one thread share a scope").isEqualTo(1);
        assertThat(host.callsIn).hasValue(0);
    }

    @Test
    void aViewWorksOnlyOnItsThreadAndTheMirrorWaitsForViewsOtherThreadsHold() throws Exception {
        BufferCore root = deviceBuffer(64);
        MemorySegment mine = BufferViews.view(root, AccessMode.WRITE);
        CountDownLatch taken = new CountDownLatch(1);
        CountDownLatch callIn = new CountDownLatch(1);
        AtomicReference<MemorySegment> theirs = new AtomicReference<>();
        AtomicReference<Throwable> afterwards = new AtomicReference<>();
        AtomicBoolean readAfterCallIn = new AtomicBoolean();
        Thread other = Thread.ofPlatform().start(() -> {
            try {
                try (ViewScope scope = ViewScope.open()) { // a view scope's view is its thread's own, as a request's is
                    theirs.set(BufferViews.view(root, AccessMode.READ));
                    taken.countDown();
                    callIn.await(10, TimeUnit.SECONDS);
                    host.scopes.endHandedOver(); // as its next call into the manager does: the scope is still open
                    theirs.get().get(ValueLayout.JAVA_BYTE, 0);
                    readAfterCallIn.set(true);
                }
                theirs.get().get(ValueLayout.JAVA_BYTE, 0);
            } catch (Throwable t) {
                afterwards.set(t);
            }
        });
        assertThat(taken.await(10, TimeUnit.SECONDS)).isTrue();
        assertThat(host.scopes.openScopes()).isEqualTo(2);
        assertThatThrownBy(() -> theirs.get().get(ValueLayout.JAVA_BYTE, 0)).isInstanceOf(WrongThreadException.class);

        root.close();

        assertThatThrownBy(() -> mine.get(ValueLayout.JAVA_BYTE, 0)).as("this thread's view ended with the close")
                .isInstanceOf(IllegalStateException.class);
        assertThat(host.released).as("the device memory, which no host view reaches, is back").singleElement()
                .satisfies(released -> assertThat(released.mirror()).isNull());
        assertThat(host.releasedMirrors).as("the other thread's view still holds the mirror").isEmpty();
        callIn.countDown();
        other.join(10_000);
        assertThat(readAfterCallIn).as("its view outlived its call in, inside its scope").isTrue();
        assertThat(afterwards.get()).as("its view ended with its scope").isInstanceOf(IllegalStateException.class);
        assertThat(host.released).hasSize(1);
        assertThat(host.releasedMirrors).hasSize(1);
        assertThat(host.scopes.openScopes()).isZero();
    }

    @Test
    void aViewOfASliceIsItsRangeOfTheBuffersViewAndOutlivesTheSlicesClose() {
        BufferCore root = host.buffer(MemoryLocation.HOST, DataType.INT8, 64);
        BufferCore slice = root.slice(16, 32);
        BufferCore inner = slice.slice(8, 8);

        MemorySegment whole = BufferViews.view(root, AccessMode.READ);
        MemorySegment part = BufferViews.view(slice, AccessMode.READ);
        MemorySegment innerPart = BufferViews.view(inner, AccessMode.READ);
        assertThat(BufferViews.view(slice, AccessMode.WRITE).address()).as("the same scope's view").isEqualTo(part.address());

        assertThat(part.byteSize()).isEqualTo(32);
        assertThat(part.address()).isEqualTo(whole.address() + 16);
        assertThat(innerPart.address()).isEqualTo(whole.address() + 24);
        assertThat(host.scopes.openScopes()).as("one scope per buffer and thread, its slices' views included").isEqualTo(1);

        slice.close();

        assertThatThrownBy(() -> BufferViews.view(slice, AccessMode.READ)).isInstanceOf(IllegalStateException.class);
        assertThatThrownBy(() -> BufferViews.view(inner, AccessMode.READ)).as("cut from the closed slice").isInstanceOf(IllegalStateException.class);
        assertThat(part.get(ValueLayout.JAVA_BYTE, 0)).as("views taken before last as the buffer's").isZero();
        assertThat(innerPart.get(ValueLayout.JAVA_BYTE, 0)).isZero();
        assertThat(host.released).isEmpty();
        root.close();
        assertThatThrownBy(() -> part.get(ValueLayout.JAVA_BYTE, 0)).isInstanceOf(IllegalStateException.class);
        assertThatThrownBy(() -> innerPart.get(ValueLayout.JAVA_BYTE, 0)).isInstanceOf(IllegalStateException.class);
        assertThat(host.released).hasSize(1);
    }

    /**
     * Views of fresh slices taken outside any view scope, as a long-lived buffer read through slices on request: each is
     * a range of the thread's view of the buffer, so they leave nothing behind but that one scope (none per slice, kept
     * until the buffer closes), on the allocating thread (confined) and on another (the buffer's shared scope), and all
     * end with the buffer.
     */
    @Test
    void viewsOfFreshSlicesOnOneThreadKeepOneScopeAndEndWithTheBuffer() throws Exception {
        BufferCore root = host.buffer(MemoryLocation.HOST, DataType.INT8, 16 * 1024);
        MemorySegment first = BufferViews.view(root.slice(0, 16), AccessMode.WRITE);
        first.set(ValueLayout.JAVA_BYTE, 0, (byte) 7);
        for (int i = 0; i < 10_000; i++) {
            BufferViews.view(root.slice((i % 1024) * 16L, 16), AccessMode.READ);
        }
        MemorySegment last = BufferViews.view(root.slice(1023 * 16, 16), AccessMode.READ);
        assertThat(host.scopes.openScopes()).as("the allocating thread's views of 10,000 slices").isEqualTo(1);

        AtomicReference<MemorySegment> elsewhere = new AtomicReference<>();
        AtomicInteger openAfterOtherThread = new AtomicInteger();
        Thread.ofPlatform().start(() -> {
            for (int i = 0; i < 10_000; i++) {
                BufferViews.view(root.slice((i % 1024) * 16L, 16), AccessMode.READ);
            }
            elsewhere.set(BufferViews.view(root.slice(0, 16), AccessMode.READ));
            openAfterOtherThread.set(host.scopes.openScopes());
        }).join(30_000);
        assertThat(openAfterOtherThread).as("and another thread's views of 10,000 more: the buffer's shared scope").hasValue(2);
        assertThat(elsewhere.get().get(ValueLayout.JAVA_BYTE, 0)).isEqualTo((byte) 7);

        root.close();

        assertThatThrownBy(() -> first.get(ValueLayout.JAVA_BYTE, 0)).isInstanceOf(IllegalStateException.class);
        assertThatThrownBy(() -> last.get(ValueLayout.JAVA_BYTE, 0)).isInstanceOf(IllegalStateException.class);
        assertThatThrownBy(() -> elsewhere.get().get(ValueLayout.JAVA_BYTE, 0)).as("the shared view").isInstanceOf(IllegalStateException.class);
        assertThat(host.scopes.openScopes()).isZero();
        assertThat(host.released).hasSize(1);
    }

    @Test
    void eachHostAccessHasAScopeOfItsOwnThatOutlivesTheBuffersClose() {
        BufferCore root = deviceBuffer(64);
        BufferCore slice = root.slice(8, 8);

        Opened reading = BufferViews.hostAccess(slice, AccessMode.READ, Sharing.CONFINED);
        assertThat(root.state()).isEqualTo(BufferState.UNINITIALIZED);
        Opened writing = BufferViews.hostAccess(root, AccessMode.WRITE, Sharing.SHARED);

        assertThat(root.state()).isEqualTo(BufferState.HOST_ONLY);
        assertThat(reading.scope()).isNotSameAs(writing.scope());
        assertThat(reading.scope().shared()).isFalse();
        assertThat(reading.scope().owner()).isSameAs(Thread.currentThread());
        assertThat(writing.scope().shared()).isTrue();
        assertThat(reading.memory().byteSize()).isEqualTo(8);
        assertThat(reading.memory().address()).isEqualTo(writing.memory().address() + 8);
        assertThat(reading.offset()).isZero();
        assertThat(host.scopes.openScopes()).isEqualTo(2);

        root.close();
        assertThat(reading.scope().isOpen()).as("an access is ended by its holder").isTrue();
        BufferViews.end(root, Side.HOST, AccessMode.READ, reading.scope(), reading.handle(), BufferCore.DONE, null, ignored -> {});
        assertThat(host.released).isEmpty();
        BufferViews.end(root, Side.HOST, AccessMode.WRITE, writing.scope(), writing.handle(), BufferCore.DONE, null, ignored -> {});
        assertThat(host.released).as("the last access gave the memory back").hasSize(1);
        assertThat(host.endsEntered).hasValue(2);
    }

    @Test
    void aWritingAccessToAFileMappedReadOnlyIsRefusedAndTheModeIsRequired() {
        BufferCore mapped = BufferCore.mapped(host, DataType.INT8, host.block(MemoryLocation.HOST, 16),
                new FileRange(Path.of("vocab.bin"), FileMapMode.READ_ONLY, 0, 16));

        assertThatThrownBy(() -> BufferViews.hostAccess(mapped, AccessMode.READ_WRITE, Sharing.CONFINED))
                .isInstanceOf(UnsupportedOperationException.class)
                .hasMessageStartingWith("a READ_WRITE host access would write")
                .hasMessageContaining("; open a READ access to read it");
        assertThatThrownBy(() -> BufferViews.deviceAccess(mapped, AccessMode.WRITE)).isInstanceOf(UnsupportedOperationException.class)
                .hasMessageStartingWith("a WRITE device access would write");
        assertThatThrownBy(() -> BufferViews.hostAccess(mapped, null, Sharing.CONFINED)).isInstanceOf(NullPointerException.class).hasMessage("mode");
        assertThatThrownBy(() -> BufferViews.deviceAccess(mapped, null)).isInstanceOf(NullPointerException.class).hasMessage("mode");
        assertThat(host.scopes.openScopes()).isZero();
        Opened read = BufferViews.hostAccess(mapped, AccessMode.READ, Sharing.CONFINED);
        read.scope().end();
    }

    @Test
    void aDeviceAccessSyncsANewerMirrorFirstAndAWritingOneMakesTheDeviceCopyNewer() {
        BufferCore root = deviceBuffer(64);
        BufferViews.view(root, AccessMode.WRITE).fill((byte) 5);
        Block block = root.ownBlock();

        Opened reading = BufferViews.deviceAccess(root.slice(16, 8), AccessMode.READ);

        assertThat(device.hostToDeviceCopies()).isEqualTo(1);
        assertThat(root.state()).isEqualTo(BufferState.SYNCHRONIZED);
        assertThat(reading.memory()).as("device memory has no host bytes").isNull();
        assertThat(reading.offset()).isEqualTo(block.offset() + 16);
        assertThat(((SimulatedDiscreteBackend.SimulatedDeviceHandle) device.openDeviceHandle(block.segment(), 0, 64, AccessMode.READ))
                .bytes().get(ValueLayout.JAVA_BYTE, 20)).isEqualTo((byte) 5);

        Opened writing = BufferViews.deviceAccess(root, AccessMode.WRITE);
        assertThat(root.state()).as("with a mirror").isEqualTo(BufferState.DEVICE_DIRTY);
        assertThat(device.hostToDeviceCopies()).as("nothing newer to sync").isEqualTo(1);
        assertThat(host.scopes.openScopes()).as("the view and two accesses").isEqualTo(3);

        BufferCore pinned = host.buffer(MemoryLocation.PINNED, DataType.INT8, 64);
        Opened onPinned = BufferViews.deviceAccess(pinned.slice(4, 4), AccessMode.READ);
        assertThat(onPinned.memory().address()).isEqualTo(pinned.ownBlock().segment().address() + 4);
        for (Opened opened : new Opened[] {reading, writing, onPinned}) {
            opened.scope().end();
        }
    }

    @Test
    void aDeviceHandleThatCannotOpenLeavesNoScopeOpen() {
        BufferCore root = deviceBuffer(64);
        backend.failOpeningHandles(new IllegalArgumentException("no kernels reach this memory"));

        assertThatThrownBy(() -> BufferViews.deviceAccess(root, AccessMode.WRITE)).hasMessage("no kernels reach this memory");

        assertThat(host.scopes.openScopes()).isZero();
        assertThat(root.state()).as("nothing was written").isEqualTo(BufferState.UNINITIALIZED);
        root.close();
        assertThat(host.released).hasSize(1);
    }

    @Test
    void endingADeviceAccessRecordsTheWorkItsHandleQueuedAndTheWorkRecordedThroughIt() {
        BufferCore root = deviceBuffer(64);
        CompletableFuture<Void> kernel = new CompletableFuture<>();
        CompletableFuture<Void> recorded = new CompletableFuture<>();
        device.queueWork(kernel);
        Opened access = BufferViews.deviceAccess(root, AccessMode.WRITE);

        BufferViews.end(root, Side.DEVICE, AccessMode.WRITE, access.scope(), access.handle(), recorded, null, ignored -> {});

        assertThat(access.scope().isOpen()).isFalse();
        assertThat(backend.handlesEnded()).isEqualTo(1);
        assertThat(root.state()).isEqualTo(BufferState.DEVICE_ONLY);
        root.close();
        CompletableFuture<?> inFlight = host.released.getFirst().inFlight();
        kernel.complete(null);
        assertThat(inFlight).as("the work recorded through the handle too").isNotDone();
        recorded.complete(null);
        assertThat(inFlight).isDone();
        assertThat(host.callsIn).hasValue(0);
    }

    @Test
    void aHandleThatCannotSayWhatItQueuedMakesTheEndWaitForTheWholeDevice() {
        BufferCore root = deviceBuffer(64);
        Opened access = BufferViews.deviceAccess(root, AccessMode.WRITE);
        backend.failEndingHandles(new IllegalStateException("the stream is broken"));

        assertThatThrownBy(() -> BufferViews.end(root, Side.DEVICE, AccessMode.WRITE, access.scope(), access.handle(), BufferCore.DONE, null, ignored -> {}))
                .hasMessage("the stream is broken");

        assertThat(host.deviceIdleWaits).hasValue(1);
        assertThat(access.scope().isOpen()).as("ended all the same").isFalse();
        assertThat(root.state()).isEqualTo(BufferState.DEVICE_ONLY);
        assertThat(host.callsIn).hasValue(0);
    }

    @Test
    void anAccessTheManagersCloseEndedFirstAsksNothingOfItsHandle() {
        BufferCore root = deviceBuffer(64);
        Opened access = BufferViews.deviceAccess(root, AccessMode.READ);
        host.closed = true; // as the manager's close does: closed first, then the scopes ended
        access.scope().end();

        BufferViews.end(root, Side.DEVICE, AccessMode.READ, access.scope(), access.handle(), BufferCore.DONE, null, ignored -> {});

        assertThat(backend.handlesEnded()).as("the backend may be gone").isZero();
        assertThat(host.endsEntered).as("counted in on a closed manager too: the scope's end, then the access's").hasValue(2);
        assertThat(host.callsIn).as("and counted out").hasValue(0);
    }

    @Test
    void endingAHostAccessMarksTheHostCopyNewerOnlyWhenItWrote() {
        BufferCore root = deviceBuffer(64);
        BufferViews.deviceAccess(root, AccessMode.WRITE).scope().end();
        Opened reading = BufferViews.hostAccess(root, AccessMode.READ, Sharing.CONFINED);
        assertThat(root.state()).as("pulled into the mirror").isEqualTo(BufferState.SYNCHRONIZED);

        BufferViews.end(root, Side.HOST, AccessMode.READ, reading.scope(), reading.handle(), BufferCore.DONE, null, ignored -> {});
        assertThat(root.state()).isEqualTo(BufferState.SYNCHRONIZED);

        Opened writing = BufferViews.hostAccess(root, AccessMode.WRITE, Sharing.CONFINED);
        BufferViews.deviceAccess(root, AccessMode.READ).scope().end(); // syncs the mirror over while the access is open
        assertThat(root.state()).isEqualTo(BufferState.SYNCHRONIZED);
        BufferViews.end(root, Side.HOST, AccessMode.WRITE, writing.scope(), writing.handle(), BufferCore.DONE, null, ignored -> {});
        assertThat(root.state()).as("what the access wrote since is newer").isEqualTo(BufferState.HOST_DIRTY);
    }

    @Test
    void aSharedAccessANativeCallStillHoldsStaysOpenUntilItIsEndedAgain() throws Throwable {
        Linker linker = Linker.nativeLinker();
        MethodHandle nanosleep = linker.downcallHandle(linker.defaultLookup().find("nanosleep").orElseThrow(),
                FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
        BufferCore root = host.buffer(MemoryLocation.HOST, DataType.INT8, 64);
        Opened access = BufferViews.hostAccess(root, AccessMode.READ_WRITE, Sharing.SHARED);
        MemorySegment timespec = access.scope().bind(access.memory());
        timespec.set(JAVA_LONG, 0, 2); // seconds
        timespec.set(JAVA_LONG, 8, 0);
        CountDownLatch calling = new CountDownLatch(1);
        Thread sleeper = Thread.ofPlatform().start(() -> {
            calling.countDown();
            try {
                int result = (int) nanosleep.invokeExact(timespec, MemorySegment.NULL);
                assertThat(result).isZero();
            } catch (Throwable e) {
                throw new AssertionError(e);
            }
        });
        assertThat(calling.await(10, TimeUnit.SECONDS)).isTrue();
        Thread.sleep(500); // inside its two-second sleep by now
        AtomicInteger stillInUse = new AtomicInteger();

        assertThatThrownBy(() -> BufferViews.end(root, Side.HOST, AccessMode.READ_WRITE, access.scope(), access.handle(),
                BufferCore.DONE, stillInUse, AtomicInteger::incrementAndGet))
                .isInstanceOf(IllegalStateException.class).hasMessageContaining("still in use by a native call");

        assertThat(stillInUse).hasValue(1);
        assertThat(access.scope().isOpen()).isTrue();
        assertThat(host.callsIn).hasValue(0);
        sleeper.join(10_000);
        BufferViews.end(root, Side.HOST, AccessMode.READ_WRITE, access.scope(), access.handle(), BufferCore.DONE, stillInUse, AtomicInteger::incrementAndGet);
        assertThat(access.scope().isOpen()).isFalse();
        assertThat(stillInUse).hasValue(1);
        assertThatThrownBy(() -> timespec.get(JAVA_LONG, 0)).isInstanceOf(IllegalStateException.class);
    }

    @Test
    void aViewTakenInAScopeEndsWithItThoughTheThreadViewedTheBufferOutsideBefore() {
        BufferCore root = deviceBuffer(64);
        BufferViews.view(root, AccessMode.WRITE).set(ValueLayout.JAVA_BYTE, 0, (byte) 7); // outside any scope: the thread's own
        MemorySegment inScope;
        try (ViewScope scope = ViewScope.open()) {
            inScope = BufferViews.view(root, AccessMode.READ);
            assertThat(inScope.get(ValueLayout.JAVA_BYTE, 0)).isEqualTo((byte) 7);
        }
        assertThatThrownBy(() -> inScope.get(ValueLayout.JAVA_BYTE, 0)).as("a view belongs to the scope it was taken in")
                .isInstanceOf(IllegalStateException.class);
        assertThat(BufferViews.view(root, AccessMode.READ).get(ValueLayout.JAVA_BYTE, 0)).as("the view taken outside still works")
                .isEqualTo((byte) 7);
    }

    @Test
    void aViewTakenInAnInnerScopeEndsWithTheInnerScope() {
        BufferCore root = deviceBuffer(64);
        try (ViewScope outer = ViewScope.open()) {
            MemorySegment outerView = BufferViews.view(root, AccessMode.WRITE);
            MemorySegment innerView;
            try (ViewScope inner = ViewScope.open()) {
                innerView = BufferViews.view(root, AccessMode.READ);
            }
            assertThatThrownBy(() -> innerView.get(ValueLayout.JAVA_BYTE, 0)).as("a view belongs to the innermost scope")
                    .isInstanceOf(IllegalStateException.class);
            outerView.set(ValueLayout.JAVA_BYTE, 0, (byte) 1);
        }
    }

    @Test
    void aLongScopeDropsTheViewsOfBuffersClosedInIt() {
        try (ViewScope scope = ViewScope.open()) {
            for (int i = 0; i < 10_000; i++) {
                BufferCore root = host.buffer(MemoryLocation.HOST, DataType.INT64, 16);
                BufferViews.view(root, AccessMode.WRITE).set(JAVA_LONG, 0, i);
                root.close();
            }
            assertThat(Objects.requireNonNull(ViewRegions.current()).viewsKept()).as("views a long-lived scope keeps after their buffers closed").isLessThan(200);
        }
    }
}
