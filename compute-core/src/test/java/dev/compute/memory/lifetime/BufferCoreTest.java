package dev.compute.memory.lifetime;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.AccessMode;
import dev.compute.memory.BufferState;
import dev.compute.memory.DataType;
import dev.compute.memory.DeviceTimeoutException;
import dev.compute.memory.DeviceWaitInterruptedException;
import dev.compute.memory.FileMapMode;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.resource.Block;
import dev.compute.memory.spi.Region;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A buffer's core on a {@link TestHost} over the simulated discrete device: its identity and slices, the door every use
 * passes, the wait for device work, and the lifetime rule (unusable at once on close, the block back exactly
 * once, when nothing holds it any more).
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class BufferCoreTest {

    private static final MemoryLocation DEVICE = MemoryLocation.DEVICE;

    private final TestHost host = new TestHost();

    private BufferCore floats(int count) {
        return host.buffer(DEVICE, DataType.FLOAT32, count);
    }

    private static void inFlight(BufferCore root, CompletableFuture<?> work) {
        synchronized (root) {
            root.recordInFlight(work);
        }
    }

    // ---- identity and slices ----------------------------------------------------------------------------------------

    @Test
    void aSliceOfASliceIsARangeOfTheRoot() {
        BufferCore root = floats(16);
        BufferCore outer = root.slice(2, 8);
        BufferCore inner = outer.slice(1, 4);

        assertThat(root.byteSize()).isEqualTo(64);
        assertThat(root.elementCount()).isEqualTo(16);
        assertThat(root.isSlice()).isFalse();
        assertThat(outer.byteOffset()).isEqualTo(8);
        assertThat(outer.byteSize()).isEqualTo(32);
        assertThat(inner.byteOffset()).as("offsets add up from the root").isEqualTo(12);
        assertThat(inner.byteSize()).isEqualTo(16);
        assertThat(inner.elementCount()).isEqualTo(4);
        assertThat(inner.isSlice()).isTrue();
        assertThat(inner.root()).isSameAs(root);
        assertThat(root).hasToString("UnifiedBuffer[DEVICE, 64 bytes, FLOAT32, UNINITIALIZED]");
        assertThat(inner).hasToString("UnifiedBuffer[DEVICE, 16 bytes at 12 of 64, FLOAT32, UNINITIALIZED]");
    }

    @Test
    void aSliceOutsideTheBufferIsRefusedWithItsRange() {
        BufferCore root = floats(16);

        assertThatThrownBy(() -> root.slice(15, 2)).isInstanceOf(IndexOutOfBoundsException.class)
                .hasMessageContaining("slice [15, 15 + 2) is outside").hasMessageContaining("of 16 elements");
        assertThatThrownBy(() -> root.slice(0, 0)).isInstanceOf(IndexOutOfBoundsException.class)
                .hasMessageContaining("(a slice needs at least one element)");
        assertThatThrownBy(() -> root.slice(-1, 1)).isInstanceOf(IndexOutOfBoundsException.class);
        assertThatThrownBy(() -> root.slice(Long.MAX_VALUE, 1)).isInstanceOf(IndexOutOfBoundsException.class);
        assertThat(root.slice(15, 1).byteOffset()).as("the last element").isEqualTo(60);
        assertThat(root.slice(0, 16).byteSize()).as("all of it").isEqualTo(64);
    }

    @Test
    void aRangeMustLieWithinTheBufferWhateverItsNumbersOverflowTo() {
        BufferCore root = floats(16);

        root.checkRange(0, 64);
        root.checkRange(64, 0);
        assertThatThrownBy(() -> root.checkRange(63, 2)).isInstanceOf(IndexOutOfBoundsException.class)
                .hasMessage("range [63, 63 + 2) is outside this buffer of 64 bytes");
        assertThatThrownBy(() -> root.checkRange(-1, 1)).isInstanceOf(IndexOutOfBoundsException.class);
        assertThatThrownBy(() -> root.checkRange(0, -1)).isInstanceOf(IndexOutOfBoundsException.class);
        assertThatThrownBy(() -> root.checkRange(Long.MAX_VALUE, 1)).isInstanceOf(IndexOutOfBoundsException.class);
        assertThatThrownBy(() -> root.checkRange(1, Long.MAX_VALUE)).isInstanceOf(IndexOutOfBoundsException.class);
    }

    @Test
    void aBufferKnowsItsHostAndWhetherTheHostCanAddressIt() {
        TestHost other = new TestHost();
        BufferCore device = floats(4);
        BufferCore pinned = host.buffer(MemoryLocation.PINNED, DataType.INT8, 4);

        assertThat(device.belongsTo(host)).isTrue();
        assertThat(device.belongsTo(other)).isFalse();
        assertThat(device.isHostAccessible()).isFalse();
        assertThat(pinned.isHostAccessible()).isTrue();
    }

    @Test
    void aMappedBufferIsHostMemoryThatHoldsDataAndItsSlicesShareTheFileAndItsMode() {
        FileRange range = new FileRange(Path.of("weights.bin"), FileMapMode.READ_ONLY, 4096, 64);
        BufferCore mapped = BufferCore.mapped(host, DataType.FLOAT32, host.block(MemoryLocation.HOST, 64), range);
        BufferCore slice = mapped.slice(0, 2);

        assertThat(mapped.location()).isEqualTo(MemoryLocation.HOST);
        assertThat(mapped.state()).isEqualTo(BufferState.SYNCHRONIZED);
        assertThat(mapped.isReadOnly()).isTrue();
        assertThat(slice.mappedFrom()).isSameAs(range);
        assertThat(slice.isReadOnly()).isTrue();
        assertThat(mapped.toString()).contains("mapped read-only from weights.bin at byte 4096");
        assertThatThrownBy(() -> slice.requireWritable("a copy into it", "")).isInstanceOf(UnsupportedOperationException.class)
                .hasMessageContaining("a copy into it would write UnifiedBuffer[HOST, 8 bytes at 0 of 64")
                .hasMessageContaining("whose file is mapped read-only")
                .hasMessageContaining("map the file FileMapMode.READ_WRITE to change it");
        assertThatThrownBy(() -> Holds.deviceRegion(mapped, AccessMode.WRITE)).isInstanceOf(UnsupportedOperationException.class);
        Holds.deviceRegion(mapped, AccessMode.READ);
        Holds.release(mapped, null, BufferCore.DONE);

        BufferCore writable = BufferCore.mapped(host, DataType.FLOAT32, host.block(MemoryLocation.HOST, 64),
                new FileRange(Path.of("weights.bin"), FileMapMode.READ_WRITE, 0, 64));
        assertThat(writable.isReadOnly()).isFalse();
        writable.requireWritable("a copy into it", "");
        assertThat(floats(4).isReadOnly()).as("pooled memory").isFalse();
    }

    // ---- the door -------------------------------------------------------------------------------------------------

    @Test
    void theDoorCountsEachCallInAndOutAndSaysWhenTheManagerIsClosed() {
        BufferCore root = floats(4);

        assertThat(root.call(null, null, () -> host.callsIn.get())).as("counted in while the body runs").isEqualTo(1);
        assertThatThrownBy(() -> root.call(null, null, () -> {
            throw new IllegalStateException("the body failed");
        })).hasMessage("the body failed");
        assertThat(host.callsIn).as("counted out, also after a failure").hasValue(0);
        assertThat(host.callsEntered).hasValue(2);

        host.closed = true;
        AtomicReference<Boolean> ran = new AtomicReference<>(false);
        assertThatThrownBy(() -> root.call(null, null, () -> ran.getAndSet(true))).isInstanceOf(IllegalStateException.class)
                .hasMessage("UnifiedBuffer[DEVICE, 16 bytes, FLOAT32] is closed because its UnifiedMemoryManager was closed");
        assertThat(ran.get()).isFalse();
        assertThat(root.isClosed()).as("a buffer of a closed manager is closed").isTrue();
        assertThatThrownBy(() -> Holds.deviceRegion(root, AccessMode.READ)).hasMessageContaining("because its UnifiedMemoryManager was closed");
    }

    // ---- close and release ------------------------------------------------------------------------------------------

    @Test
    void closeGivesTheBlockBackOnceWithTheDeviceWorkStillInFlight() {
        BufferCore root = floats(4);
        Block block = root.ownBlock();
        CompletableFuture<Void> first = new CompletableFuture<>();
        CompletableFuture<Void> second = new CompletableFuture<>();
        inFlight(root, first);
        inFlight(root, second);
        inFlight(root, BufferCore.DONE); // done work adds nothing

        root.close();
        root.close();
        root.closeLeaked();
        root.releaseIfUnused();

        assertThat(root.isClosed()).isTrue();
        assertThat(host.released).singleElement().satisfies(released -> {
            assertThat(released.block()).isSameAs(block);
            assertThat(released.location()).isEqualTo(DEVICE);
            assertThat(released.mirror()).isNull();
            assertThat(released.inFlight()).as("not waited for: given with the release").isNotDone();
            second.complete(null);
            assertThat(released.inFlight()).as("all the work recorded, not the last only").isNotDone();
            first.complete(null);
            assertThat(released.inFlight()).isDone();
        });
    }

    @Test
    void aClosedBufferRefusesEveryUseAndSaysSo() {
        BufferCore root = floats(4);
        root.close();

        assertThat(root).hasToString("UnifiedBuffer[DEVICE, 16 bytes, FLOAT32, closed]");
        assertThatThrownBy(() -> root.slice(0, 1)).isInstanceOf(IllegalStateException.class)
                .hasMessage("UnifiedBuffer[DEVICE, 16 bytes, FLOAT32] is closed");
        assertThatThrownBy(() -> Holds.deviceRegion(root, AccessMode.READ)).isInstanceOf(IllegalStateException.class);
        assertThatThrownBy(root::ownBlock).isInstanceOf(IllegalStateException.class).hasMessageContaining("has no block of its own");
        assertThatThrownBy(() -> root.slice(0, 1).ownBlock()).isInstanceOf(IllegalStateException.class);
    }

    @Test
    void aSliceClosesAloneAndItsSlicesSayWhichAncestorWasClosed() {
        BufferCore root = floats(16);
        BufferCore outer = root.slice(0, 8);
        BufferCore inner = outer.slice(0, 4);
        BufferCore sibling = root.slice(8, 8);
        assertThatThrownBy(inner::ownBlock).hasMessageContaining("has no block of its own");

        outer.close();

        assertThat(outer.isClosed()).isTrue();
        assertThat(inner.isClosed()).isTrue();
        assertThat(root.isClosed()).isFalse();
        assertThat(sibling.isClosed()).isFalse();
        assertThat(host.released).as("a slice owns no memory").isEmpty();
        assertThatThrownBy(() -> inner.slice(0, 1)).hasMessageEndingWith("is closed (the slice it was cut from was closed)");
        assertThatThrownBy(() -> outer.slice(0, 1)).hasMessageEndingWith("is closed");

        root.close();
        assertThatThrownBy(() -> sibling.slice(0, 1)).hasMessageEndingWith("is closed (the buffer it is a slice of was closed)");
        assertThat(host.released).hasSize(1);
    }

    @Test
    void onlyAnOpenRootThatNothingHoldsIsUnheld() {
        BufferCore root = host.buffer(MemoryLocation.HOST, DataType.INT8, 64);
        assertThat(TestHost.unheld(root)).isTrue();

        BufferViews.view(root, AccessMode.READ);
        assertThat(TestHost.unheld(root)).as("a view is open").isFalse();
        host.scopes.endAllOfCurrentThread();
        assertThat(TestHost.unheld(root)).isTrue();

        BufferCore slice = root.slice(0, 8);
        synchronized (root) {
            assertThat(slice.unheld()).as("a slice is never moved on its own").isFalse();
        }
        host.closed = true;
        assertThat(TestHost.unheld(root)).as("the manager is closed").isFalse();
        host.closed = false;
        root.close();
        assertThat(TestHost.unheld(root)).isFalse();
    }

    @Test
    void aLeakedBufferEndsEvenTheAccessesLeftOpenAndIsReleasedOnce() {
        BufferCore leaked = host.buffer(MemoryLocation.HOST, DataType.INT8, 64);
        BufferViews.Opened access = BufferViews.hostAccess(leaked, AccessMode.READ, BufferViews.Sharing.CONFINED);
        BufferCore closed = host.buffer(MemoryLocation.HOST, DataType.INT8, 64);
        BufferViews.Opened kept = BufferViews.hostAccess(closed, AccessMode.READ, BufferViews.Sharing.CONFINED);

        leaked.closeLeaked();
        closed.close();

        assertThat(access.scope().isOpen()).as("nobody could end it any more").isFalse();
        assertThat(kept.scope().isOpen()).as("close() leaves an access to its holder").isTrue();
        assertThat(host.released).singleElement().satisfies(r -> assertThat(r.block().segment().address())
                .isEqualTo(access.memory().address()));
        leaked.close();
        kept.scope().end();
        assertThat(host.released).hasSize(2);
    }

    // ---- waiting for device work -------------------------------------------------------------------------------------

    @Test
    void useWaitsForDeviceWorkWithoutHoldingTheBufferSoOthersCanStillAskAndClose() throws Exception {
        BufferCore root = floats(4);
        CompletableFuture<Void> kernel = new CompletableFuture<>();
        inFlight(root, kernel);
        AtomicReference<Object> held = new AtomicReference<>();
        Thread user = Thread.ofPlatform().start(() -> {
            try {
                held.set(Holds.deviceRegion(root, AccessMode.READ));
            } catch (Throwable t) {
                held.set(t);
            }
        });
        waitUntilWaiting(user);

        assertThat(root.state()).isEqualTo(BufferState.UNINITIALIZED);
        assertThat(root.toString()).contains("UNINITIALIZED");
        assertThat(held.get()).as("still waiting for the kernel").isNull();
        kernel.complete(null);
        user.join(10_000);

        assertThat(held.get()).isInstanceOf(Region.class);
        Holds.release(root, null, BufferCore.DONE);
    }

    @Test
    void workThatFailedIsOverTooAndIsNotTheUsersFailure() throws Exception {
        BufferCore root = floats(4);
        CompletableFuture<Void> kernel = new CompletableFuture<>();
        inFlight(root, kernel);
        Thread.ofPlatform().start(() -> {
            sleep(50);
            kernel.completeExceptionally(new IllegalStateException("the kernel faulted"));
        });

        Holds.deviceRegion(root, AccessMode.READ);

        Holds.release(root, null, BufferCore.DONE);
        root.close();
        assertThat(host.released.getFirst().inFlight()).as("the failed work is forgotten once waited for").isDone();
    }

    @Test
    void workPastTheDeviceWaitTimeoutFailsTheUseAndChangesNothing() {
        host.deviceWaitTimeout = Duration.ofMillis(100);
        BufferCore root = floats(4);
        inFlight(root, new CompletableFuture<>());

        long start = System.nanoTime();
        assertThatThrownBy(() -> Holds.deviceRegion(root, AccessMode.WRITE)).isInstanceOf(DeviceTimeoutException.class)
                .hasMessageContaining("device work queued on UnifiedBuffer[DEVICE, 16 bytes, FLOAT32, UNINITIALIZED]")
                .hasMessageContaining("did not finish within 100 ms (compute.memory.device-wait-timeout)");
        assertThat(Duration.ofNanos(System.nanoTime() - start)).isGreaterThanOrEqualTo(Duration.ofMillis(90));
        assertThat(root.state()).as("nothing was changed").isEqualTo(BufferState.UNINITIALIZED);
        assertThat(TestHost.unheld(root)).as("no hold was taken").isTrue();

        Thread.currentThread().interrupt();
        try {
            assertThatThrownBy(() -> Holds.deviceRegion(root, AccessMode.READ)).isInstanceOf(DeviceWaitInterruptedException.class)
                    .hasMessageStartingWith("interrupted while waiting for device work queued on")
                    .hasCauseInstanceOf(InterruptedException.class)
                    .satisfies(thrown -> assertThat(((DeviceTimeoutException) thrown).waited()).as("not the limit")
                            .isLessThan(Duration.ofMillis(100)));
            assertThat(Thread.currentThread().isInterrupted()).as("the interrupt is kept").isTrue();
        } finally {
            Thread.interrupted();
        }
    }

    static void waitUntilWaiting(Thread thread) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (thread.getState() != Thread.State.WAITING && thread.getState() != Thread.State.TIMED_WAITING) {
            assertThat(System.nanoTime() - deadline).as("%s waits within 10 s", thread).isNegative();
            assertThat(thread.isAlive()).as("%s is still running", thread).isTrue();
            Thread.sleep(1);
        }
    }

    private static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
