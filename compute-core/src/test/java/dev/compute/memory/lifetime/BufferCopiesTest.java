package dev.compute.memory.lifetime;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.BufferState;
import dev.compute.memory.DataType;
import dev.compute.memory.FileMapMode;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.lifetime.BufferHost.Transfer;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import dev.compute.memory.testing.ControlledBackend;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Copies between a buffer and the caller's memory or another buffer, on the simulated discrete device behind a
 * {@link ControlledBackend} (whose async copies the tests hold on the device): ranges checked before anything moves,
 * read-only files refused, the bytes where they belong, and async copies recorded as device work on the buffer.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class BufferCopiesTest {

    private final SimulatedDiscreteBackend device = new SimulatedDiscreteBackend();
    private final ControlledBackend backend = new ControlledBackend(device);
    private final TestHost host = new TestHost(backend);

    private static MemorySegment counting(int from, int count) {
        byte[] bytes = new byte[count];
        for (int i = 0; i < count; i++) {
            bytes[i] = (byte) (from + i);
        }
        return MemorySegment.ofArray(bytes);
    }

    private static byte[] read(BufferCore buffer, long offset, int length) {
        MemorySegment out = MemorySegment.ofArray(new byte[length]);
        BufferCopies.read(buffer, offset, out);
        return out.toArray(ValueLayout.JAVA_BYTE);
    }

    private static byte[] range(int from, int count) {
        return counting(from, count).toArray(ValueLayout.JAVA_BYTE);
    }

    @ParameterizedTest
    @EnumSource(value = MemoryLocation.class, names = {"DEVICE", "HOST"})
    void whatIsWrittenThroughASliceIsReadBackAtItsPlaceInTheBuffer(MemoryLocation location) {
        BufferCore root = host.buffer(location, DataType.INT8, 64);
        BufferCore slice = root.slice(16, 32);

        BufferCopies.write(slice, 4, counting(1, 8));

        assertThat(read(root, 20, 8)).containsExactly(range(1, 8));
        assertThat(read(slice, 3, 10)).containsExactly(0, 1, 2, 3, 4, 5, 6, 7, 8, 0);
        assertThat(host.callsIn).as("every copy counted out").hasValue(0);
        assertThat(host.callsEntered).hasValue(3);
        assertThat(host.transferred(Transfer.HOST_TO_DEVICE)).isEqualTo(8);
        assertThat(host.transferred(Transfer.DEVICE_TO_HOST)).isEqualTo(18);
    }

    @Test
    void aCopyOutsideTheBufferIsRefusedBeforeAnythingMoves() {
        BufferCore root = host.buffer(MemoryLocation.DEVICE, DataType.INT8, 64);
        BufferCore slice = root.slice(0, 16);

        assertThatThrownBy(() -> BufferCopies.write(slice, 10, counting(0, 8))).isInstanceOf(IndexOutOfBoundsException.class)
                .hasMessageContaining("range [10, 10 + 8) is outside this buffer of 16 bytes");
        assertThatThrownBy(() -> BufferCopies.read(root, -1, MemorySegment.ofArray(new byte[1]))).isInstanceOf(IndexOutOfBoundsException.class);
        assertThatThrownBy(() -> BufferCopies.writeAsync(root, 60, counting(0, 8))).isInstanceOf(IndexOutOfBoundsException.class);
        assertThatThrownBy(() -> BufferCopies.readAsync(root, 64, MemorySegment.ofArray(new byte[1]))).isInstanceOf(IndexOutOfBoundsException.class);

        assertThat(device.hostToDeviceCopies() + device.deviceToHostCopies()).isZero();
        assertThat(host.transferred(Transfer.HOST_TO_DEVICE) + host.transferred(Transfer.DEVICE_TO_HOST)).isZero();
        assertThat(root.state()).isEqualTo(BufferState.UNINITIALIZED);
        assertThat(host.callsIn).hasValue(0);
    }

    @Test
    void aFileMappedReadOnlyIsReadButNeverWritten() {
        BufferCore mapped = BufferCore.mapped(host, DataType.INT8, host.block(MemoryLocation.HOST, 16),
                new FileRange(Path.of("table.bin"), FileMapMode.READ_ONLY, 0, 16));
        BufferCore pooled = host.buffer(MemoryLocation.HOST, DataType.INT8, 16);

        assertThatThrownBy(() -> BufferCopies.write(mapped, 0, counting(0, 1))).isInstanceOf(UnsupportedOperationException.class)
                .hasMessageStartingWith("a copy into it would write");
        assertThatThrownBy(() -> BufferCopies.writeAsync(mapped, 0, counting(0, 1))).isInstanceOf(UnsupportedOperationException.class)
                .hasMessageStartingWith("copyFromAsync would write");
        assertThatThrownBy(() -> BufferCopies.copy(pooled, 0, mapped, 0, 1)).isInstanceOf(UnsupportedOperationException.class)
                .hasMessageStartingWith("copyFrom would write");
        assertThat(host.callsEntered).as("refused before the door").hasValue(0);

        assertThat(read(mapped, 0, 4)).containsOnly(0);
        BufferCopies.copy(mapped, 0, pooled, 0, 16);
    }

    @Test
    void anAsyncWriteToTheDeviceIsDeviceWorkOnTheBufferUntilItLands() throws Exception {
        BufferCore root = host.buffer(MemoryLocation.DEVICE, DataType.INT8, 16);
        backend.holdDeviceWork();

        CompletableFuture<Void> written = BufferCopies.writeAsync(root, 0, counting(1, 16));

        assertThat(written).isNotDone();
        assertThat(root.state()).isEqualTo(BufferState.DEVICE_ONLY);
        assertThat(host.transferred(Transfer.HOST_TO_DEVICE)).isEqualTo(16);
        CompletableFuture<byte[]> reader = CompletableFuture.supplyAsync(() -> read(root, 0, 16));
        Thread.sleep(100);
        assertThat(reader).as("a read waits for the write in flight").isNotDone();
        backend.releaseDeviceWork();
        assertThat(written).succeedsWithin(Duration.ofSeconds(10));
        assertThat(reader).succeedsWithin(Duration.ofSeconds(10)).isEqualTo(range(1, 16));

        backend.holdDeviceWork();
        CompletableFuture<Void> again = BufferCopies.writeAsync(root, 0, counting(2, 16));
        root.close();
        assertThat(host.released).as("given back with the write in flight").singleElement()
                .satisfies(r -> assertThat(r.inFlight()).isNotDone());
        backend.releaseDeviceWork();
        assertThat(again).succeedsWithin(Duration.ofSeconds(10));
        assertThat(host.released.getFirst().inFlight()).isDone();
    }

    @Test
    void anAsyncReadFromTheDeviceFillsTheDestinationOnceDone() {
        BufferCore root = host.buffer(MemoryLocation.DEVICE, DataType.INT8, 16);
        BufferCopies.write(root, 0, counting(1, 16));
        backend.holdDeviceWork();
        MemorySegment out = MemorySegment.ofArray(new byte[4]);

        CompletableFuture<Void> done = BufferCopies.readAsync(root.slice(8, 8), 2, out);

        assertThat(done).isNotDone();
        assertThat(out.toArray(ValueLayout.JAVA_BYTE)).containsOnly(0);
        assertThat(host.transferred(Transfer.DEVICE_TO_HOST)).isEqualTo(4);
        backend.releaseDeviceWork();
        assertThat(done).succeedsWithin(Duration.ofSeconds(10));
        assertThat(out.toArray(ValueLayout.JAVA_BYTE)).containsExactly(range(11, 4));
        assertThat(root.state()).as("a read changes no state").isEqualTo(BufferState.DEVICE_ONLY);
    }

    @Test
    void asyncCopiesThatNeedNoDeviceAreDoneAtOnce() {
        backend.holdDeviceWork();
        BufferCore hostMemory = host.buffer(MemoryLocation.HOST, DataType.INT8, 16);
        BufferCore hostNewer = host.buffer(MemoryLocation.DEVICE, DataType.INT8, 16);
        BufferViews.view(hostNewer, dev.compute.memory.AccessMode.WRITE); // a mirror, newer than the device

        assertThat(BufferCopies.writeAsync(hostMemory, 0, counting(1, 4))).isCompletedWithValue(null);
        assertThat(BufferCopies.readAsync(hostMemory, 0, MemorySegment.ofArray(new byte[4]))).isCompletedWithValue(null);
        assertThat(BufferCopies.writeAsync(hostNewer, 0, counting(1, 4))).as("into the newer mirror").isCompletedWithValue(null);
        MemorySegment out = MemorySegment.ofArray(new byte[4]);
        assertThat(BufferCopies.readAsync(hostNewer, 0, out)).isCompletedWithValue(null);
        assertThat(out.toArray(ValueLayout.JAVA_BYTE)).containsExactly(range(1, 4));
        assertThat(device.hostToDeviceCopies() + device.deviceToHostCopies()).isZero();
        backend.releaseDeviceWork();
        host.scopes.endAllOfCurrentThread();
    }

    @Test
    void bufferToBufferCopiesGoByTheHostWhereEitherSideIsHostMemoryElseWithinTheDevice() {
        BufferCore hostSide = host.buffer(MemoryLocation.HOST, DataType.INT8, 32);
        BufferCore deviceA = host.buffer(MemoryLocation.DEVICE, DataType.INT8, 32);
        BufferCore deviceB = host.buffer(MemoryLocation.DEVICE, DataType.INT8, 32);
        BufferCopies.write(hostSide, 0, counting(1, 32));

        BufferCopies.copy(hostSide, 4, deviceA, 8, 10);
        assertThat(read(deviceA, 8, 10)).containsExactly(range(5, 10));
        BufferCopies.copy(deviceA, 8, hostSide, 20, 10);
        assertThat(read(hostSide, 20, 10)).containsExactly(range(5, 10));
        assertThat(device.deviceToDeviceCopies()).isZero();

        BufferCopies.copy(deviceA.slice(8, 10), 0, deviceB, 2, 10);
        assertThat(device.deviceToDeviceCopies()).isEqualTo(1);
        assertThat(host.transferred(Transfer.DEVICE_TO_DEVICE)).isEqualTo(10);
        assertThat(read(deviceB, 2, 10)).containsExactly(range(5, 10));
        assertThat(deviceB.state()).as("the target's device copy was written").isEqualTo(BufferState.DEVICE_ONLY);
        for (BufferCore buffer : new BufferCore[] {hostSide, deviceA, deviceB}) {
            assertThat(TestHost.unheld(buffer)).as("%s is let go after the copy", buffer).isTrue();
        }
        assertThat(host.callsIn).hasValue(0);
    }

    @Test
    void aBufferToBufferCopyIsCheckedBeforeAnythingMoves() {
        BufferCore source = host.buffer(MemoryLocation.DEVICE, DataType.INT8, 16);
        BufferCore target = host.buffer(MemoryLocation.DEVICE, DataType.INT8, 16);
        BufferCore foreign = new TestHost(device).buffer(MemoryLocation.DEVICE, DataType.INT8, 16);

        assertThatThrownBy(() -> BufferCopies.copy(foreign, 0, target, 0, 4)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("the source buffer belongs to another UnifiedMemoryManager; copy through host memory instead");
        assertThatThrownBy(() -> BufferCopies.copy(source, 14, target, 0, 4)).isInstanceOf(IndexOutOfBoundsException.class);
        assertThatThrownBy(() -> BufferCopies.copy(source, 0, target, 13, 4)).isInstanceOf(IndexOutOfBoundsException.class);
        target.close();
        assertThatThrownBy(() -> BufferCopies.copy(source, 0, target, 0, 4)).isInstanceOf(IllegalStateException.class).hasMessageContaining("is closed");

        assertThat(device.deviceToDeviceCopies()).isZero();
        assertThat(TestHost.unheld(source)).as("the source was let go when the target could not be held").isTrue();
        assertThat(host.callsIn).hasValue(0);
    }
}
