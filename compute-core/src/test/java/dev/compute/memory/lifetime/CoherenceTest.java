package dev.compute.memory.lifetime;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.AccessMode;
import dev.compute.memory.BufferState;
import dev.compute.memory.DataType;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.lifetime.BufferHost.Transfer;
import dev.compute.memory.resource.Block;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import dev.compute.memory.simulated.SimulatedDiscreteBackend.SimulatedDeviceHandle;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import org.junit.jupiter.api.Test;

/**
 * Which copy of a buffer is newer and how the other is brought up to date, on the simulated discrete device (DEVICE
 * memory the host cannot address, so there is a mirror to keep) and on its host memory (one copy: nothing to do). The
 * device's bytes are read and written here through the simulated device handle, which the backend does not count as a
 * copy, so the backend's copy counts are the copies Coherence made.
 */
class CoherenceTest {

    private final SimulatedDiscreteBackend backend = new SimulatedDiscreteBackend();
    private final TestHost host = new TestHost(backend);

    private BufferCore device(int bytes) {
        return host.buffer(MemoryLocation.DEVICE, DataType.INT8, bytes);
    }

    /** The device copy's bytes, as a kernel sees them. */
    private MemorySegment deviceBytes(BufferCore root) {
        Block block = root.ownBlock();
        return ((SimulatedDeviceHandle) backend.openDeviceHandle(block.segment(), block.offset(), block.size(), AccessMode.READ_WRITE)).bytes();
    }

    private static MemorySegment bytes(int... values) {
        byte[] array = new byte[values.length];
        for (int i = 0; i < values.length; i++) {
            array[i] = (byte) values[i];
        }
        return MemorySegment.ofArray(array);
    }

    private static void state(BufferCore root, BufferState state) {
        synchronized (root) {
            root.state = state;
        }
    }

    /** The host copy made current, under the root's monitor, as a view takes it. */
    private static MemorySegment hostCopy(BufferCore root) {
        synchronized (root) {
            return Coherence.currentHostRange(root, root.openBlock(), 0, root.byteSize);
        }
    }

    @Test
    void theStateAfterAWriteDependsOnWhichCopyWroteAndWhetherThereIsAMirror() {
        BufferCore discrete = device(64);
        BufferCore shared = host.buffer(MemoryLocation.HOST, DataType.INT8, 64);
        synchronized (discrete) {
            assertThat(Coherence.deviceWritten(discrete)).as("no mirror yet").isEqualTo(BufferState.DEVICE_ONLY);
            for (BufferState before : BufferState.values()) {
                discrete.state = before;
                BufferState expected = before == BufferState.UNINITIALIZED || before == BufferState.HOST_ONLY
                        ? BufferState.HOST_ONLY : BufferState.HOST_DIRTY;
                assertThat(Coherence.hostWritten(discrete)).as("host written from %s", before).isEqualTo(expected);
            }
            discrete.mirror = host.block(MemoryLocation.HOST, 64);
            assertThat(Coherence.deviceWritten(discrete)).as("with a mirror").isEqualTo(BufferState.DEVICE_DIRTY);
        }
        synchronized (shared) {
            assertThat(Coherence.deviceWritten(shared)).isEqualTo(BufferState.SYNCHRONIZED);
            assertThat(Coherence.hostWritten(shared)).isEqualTo(BufferState.SYNCHRONIZED);
        }
    }

    @Test
    void aReadComesFromTheMirrorOnlyWhenItIsAtLeastAsNewAsTheDevice() {
        BufferCore root = device(64);
        synchronized (root) {
            for (BufferState state : BufferState.values()) {
                root.state = state;
                assertThat(Coherence.readsFromDevice(root)).as("no mirror, %s", state).isTrue();
            }
            root.mirror = host.block(MemoryLocation.HOST, 64);
            for (BufferState state : BufferState.values()) {
                root.state = state;
                boolean mirrorCurrent = state == BufferState.SYNCHRONIZED || state.hostIsNewer();
                assertThat(Coherence.readsFromDevice(root)).as("mirror, %s", state).isEqualTo(!mirrorCurrent);
            }
        }
    }

    @Test
    void syncToHostPullsNewerDeviceDataIntoAMirrorMadeOnFirstNeedAndThenHasNothingToDo() {
        BufferCore root = device(16);
        deviceBytes(root).fill((byte) 7);
        Coherence.markDeviceDirty(root);
        assertThat(root.state()).isEqualTo(BufferState.DEVICE_ONLY);

        Coherence.syncToHost(root);

        assertThat(host.mirrors).hasValue(1);
        assertThat(root.state()).isEqualTo(BufferState.SYNCHRONIZED);
        assertThat(backend.deviceToHostCopies()).isEqualTo(1);
        assertThat(host.transferred(Transfer.DEVICE_TO_HOST)).isEqualTo(16);
        assertThat(Coherence.rootBytes(root, root.mirror).toArray(ValueLayout.JAVA_BYTE)).containsOnly((byte) 7);

        Coherence.syncToHost(root);
        Coherence.syncToDevice(root);
        assertThat(backend.deviceToHostCopies()).as("in sync: no copy").isEqualTo(1);
        assertThat(backend.hostToDeviceCopies()).isZero();
        assertThat(host.mirrors).hasValue(1);
    }

    @Test
    void syncToDevicePushesANewerMirror() {
        BufferCore root = device(16);
        MemorySegment mirror = hostCopy(root);
        mirror.fill((byte) 9);
        Coherence.markHostDirty(root);
        assertThat(root.state()).isEqualTo(BufferState.HOST_ONLY);

        Coherence.syncToDevice(root);

        assertThat(root.state()).isEqualTo(BufferState.SYNCHRONIZED);
        assertThat(backend.hostToDeviceCopies()).isEqualTo(1);
        assertThat(host.transferred(Transfer.HOST_TO_DEVICE)).isEqualTo(16);
        assertThat(deviceBytes(root).toArray(ValueLayout.JAVA_BYTE)).containsOnly((byte) 9);
        assertThat(backend.deviceToHostCopies()).as("a fresh mirror of an uninitialized buffer is not filled from the device").isZero();
    }

    @Test
    void marksMakeTheCopyWrittenByOtherMeansTheNewerOneAndTheHostOneNeedsAMirror() {
        BufferCore root = device(16);

        assertThatThrownBy(() -> Coherence.markHostDirty(root)).isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("has no host copy to be newer: it is made by hostView() or hostAccess()");
        hostCopy(root);
        state(root, BufferState.SYNCHRONIZED);

        Coherence.markHostDirty(root.slice(0, 4));
        assertThat(root.state()).as("a slice marks its buffer").isEqualTo(BufferState.HOST_DIRTY);
        Coherence.markDeviceDirty(root);
        assertThat(root.state()).isEqualTo(BufferState.DEVICE_DIRTY);

        root.close();
        assertThatThrownBy(() -> Coherence.markDeviceDirty(root)).isInstanceOf(IllegalStateException.class).hasMessageContaining("is closed");
        assertThatThrownBy(() -> Coherence.syncToHost(root)).isInstanceOf(IllegalStateException.class);
    }

    @Test
    void onMemoryTheHostAddressesThereIsOneCopyAndNothingToSync() {
        BufferCore root = host.buffer(MemoryLocation.PINNED, DataType.INT8, 16);

        Coherence.markDeviceDirty(root);
        assertThat(root.state()).as("its one copy holds data now").isEqualTo(BufferState.SYNCHRONIZED);
        Coherence.markHostDirty(root);
        assertThat(root.state()).isEqualTo(BufferState.SYNCHRONIZED);
        Coherence.syncToDevice(root);
        Coherence.syncToHost(root);

        assertThat(hostCopy(root).address()).as("the memory itself").isEqualTo(root.ownBlock().segment().address());
        assertThat(host.mirrors).hasValue(0);
        assertThat(backend.hostToDeviceCopies() + backend.deviceToHostCopies()).isZero();
        for (Transfer transfer : Transfer.values()) {
            assertThat(host.transferred(transfer)).isZero();
        }
    }

    @Test
    void aWriteLandsInTheNewerCopyAtTheSlicesPlace() {
        BufferCore root = device(16);
        BufferCore slice = root.slice(8, 8);

        synchronized (root) {
            Coherence.write(slice, root, root.openBlock(), 2, bytes(1, 2, 3));
        }
        assertThat(root.state()).isEqualTo(BufferState.DEVICE_ONLY);
        assertThat(backend.hostToDeviceCopies()).isEqualTo(1);
        assertThat(deviceBytes(root).asSlice(10, 3).toArray(ValueLayout.JAVA_BYTE)).containsExactly(1, 2, 3);
        assertThat(deviceBytes(root).get(ValueLayout.JAVA_BYTE, 9)).isZero();

        hostCopy(root); // pulls the device's bytes: SYNCHRONIZED
        Coherence.markHostDirty(root);
        synchronized (root) {
            Coherence.write(slice, root, root.openBlock(), 0, bytes(4, 5));
        }
        assertThat(backend.hostToDeviceCopies()).as("the newer mirror took it").isEqualTo(1);
        assertThat(Coherence.rootBytes(root, root.mirror).asSlice(8, 5).toArray(ValueLayout.JAVA_BYTE)).containsExactly(4, 5, 1, 2, 3);
        assertThat(deviceBytes(root).get(ValueLayout.JAVA_BYTE, 8)).as("the device copy is older now").isZero();
        assertThat(root.state()).isEqualTo(BufferState.HOST_DIRTY);
        assertThat(host.transferred(Transfer.HOST_TO_DEVICE)).as("a write counts its bytes whichever copy it lands in").isEqualTo(5);
    }

    @Test
    void aReadComesFromTheNewerCopyAtTheSlicesPlace() {
        BufferCore root = device(16);
        BufferCore slice = root.slice(4, 8);
        for (int i = 0; i < 16; i++) {
            deviceBytes(root).set(ValueLayout.JAVA_BYTE, i, (byte) i);
        }
        Coherence.markDeviceDirty(root);
        MemorySegment out = MemorySegment.ofArray(new byte[3]);

        synchronized (root) {
            Coherence.read(slice, root, root.openBlock(), 1, out);
        }
        assertThat(out.toArray(ValueLayout.JAVA_BYTE)).containsExactly(5, 6, 7);
        assertThat(backend.deviceToHostCopies()).as("no mirror: from the device").isEqualTo(1);

        hostCopy(root);
        deviceBytes(root).set(ValueLayout.JAVA_BYTE, 5, (byte) 99); // unseen: the mirror is as new as the device
        synchronized (root) {
            Coherence.read(slice, root, root.openBlock(), 1, out);
        }
        assertThat(out.toArray(ValueLayout.JAVA_BYTE)).containsExactly(5, 6, 7);
        assertThat(backend.deviceToHostCopies()).as("one pull for the mirror, no read from the device").isEqualTo(2);
        assertThat(host.transferred(Transfer.DEVICE_TO_HOST)).isEqualTo(3 + 16 + 3);
    }

    @Test
    void deviceMemoryHasNoHostBytes() {
        BufferCore root = device(16);

        assertThatThrownBy(() -> Coherence.rootBytes(root, root.ownBlock())).isInstanceOf(IllegalStateException.class)
                .hasMessage("memory at DEVICE is not host-accessible on this backend");
    }
}
