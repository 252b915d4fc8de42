package dev.compute.memory.manager;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.AccessMode;
import dev.compute.memory.CompactionReport;
import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.OutOfMemoryReason;
import dev.compute.memory.lifetime.BufferCopies;
import dev.compute.memory.lifetime.BufferCore;
import dev.compute.memory.lifetime.Holds;
import dev.compute.memory.resource.Block;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import dev.compute.memory.testing.FaultInjectingBackend;
import dev.compute.memory.testing.LogCapture;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.logging.Level;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Compaction on the simulated device, with plain segments: two 4 MiB buffers share a segment, the first is closed, and
 * the second may move into its place. What moves (only a buffer the registry knows and nothing holds), whether its
 * data goes with it, what the report says, and the compaction on out-of-memory: not repeated until something changed,
 * nothing moved while a mirror is allocated, a failed move no more than a compaction that made no room.
 */
class CompactorTest {

    private static final long MiB = 1L << 20;
    private static final MemoryLocation DEVICE = MemoryLocation.DEVICE;

    private final SimulatedDiscreteBackend device = new SimulatedDiscreteBackend();
    private final FaultInjectingBackend backend = new FaultInjectingBackend(device, 1);
    private final ManagerParts parts = ManagerParts.on(backend).build();
    private final Compactor compactor = parts.compactor;

    @AfterEach
    void close() {
        parts.close();
    }

    /** A buffer closed in front of the one returned, so that the one returned could move into its place. */
    private BufferCore behindAGap() {
        BufferCore first = parts.buffer(DEVICE, 4 * MiB);
        BufferCore second = parts.buffer(DEVICE, 4 * MiB);
        assertThat(second.ownBlock().segment()).as("one segment").isSameAs(first.ownBlock().segment());
        assertThat(second.ownBlock().offset()).isPositive();
        first.close();
        return second;
    }

    private static void fill(BufferCore buffer, byte value) {
        byte[] bytes = new byte[(int) buffer.byteSize()];
        java.util.Arrays.fill(bytes, value);
        BufferCopies.write(buffer, 0, MemorySegment.ofArray(bytes));
    }

    private static byte[] contents(BufferCore buffer) {
        MemorySegment out = MemorySegment.ofArray(new byte[(int) buffer.byteSize()]);
        BufferCopies.read(buffer, 0, out);
        return out.toArray(ValueLayout.JAVA_BYTE);
    }

    private static DeviceOutOfMemoryException outOfMemory(MemoryLocation location) {
        return new DeviceOutOfMemoryException(location, MiB, OutOfMemoryReason.DEVICE_MEMORY, "out of " + location + " memory");
    }

    @Test
    void anUnheldBufferMovesIntoTheGapWithItsData() {
        BufferCore buffer = behindAGap();
        fill(buffer, (byte) 7);
        Block block = buffer.ownBlock();

        CompactionReport report = compactor.compact(DEVICE);

        assertThat(report.buffersMoved()).isEqualTo(1);
        assertThat(report.bytesMoved()).isEqualTo(block.size());
        assertThat(report.buffersInUse()).isZero();
        assertThat(report.location()).isEqualTo(DEVICE);
        assertThat(buffer.ownBlock()).as("the block the buffer holds says its new place").isSameAs(block);
        assertThat(block.offset()).isZero();
        assertThat(device.deviceToDeviceCopies()).isEqualTo(1);
        assertThat(contents(buffer)).containsOnly((byte) 7);
        assertThat(parts.events.compactions).containsExactly(report);
    }

    @Test
    void aBufferWithNoDataInItsBlockMovesWithoutACopy() {
        BufferCore buffer = behindAGap();

        assertThat(compactor.compact(DEVICE).buffersMoved()).isEqualTo(1);

        assertThat(buffer.ownBlock().offset()).isZero();
        assertThat(device.deviceToDeviceCopies()).isZero();
    }

    @Test
    void aHeldBufferStaysWhereItIsAndIsCountedInUse() {
        BufferCore buffer = behindAGap();
        long offset = buffer.ownBlock().offset();
        Holds.deviceRegion(buffer, AccessMode.READ);

        CompactionReport report = compactor.compact(DEVICE);

        assertThat(report.buffersMoved()).isZero();
        assertThat(report.buffersInUse()).isEqualTo(1);
        assertThat(buffer.ownBlock().offset()).isEqualTo(offset);
        Holds.release(buffer, null, java.util.concurrent.CompletableFuture.completedFuture(null));
        assertThat(compactor.compact(DEVICE).buffersMoved()).isEqualTo(1);
    }

    @Test
    void aBlockTheRegistryForgotIsNotMoved() {
        BufferCore buffer = behindAGap();
        long offset = buffer.ownBlock().offset();

        compactor.forget(parts.chains.open(DEVICE), buffer.ownBlock());
        CompactionReport report = compactor.compact(DEVICE);

        assertThat(report.buffersMoved()).isZero();
        assertThat(report.buffersInUse()).as("not known, so not counted").isZero();
        assertThat(buffer.ownBlock().offset()).isEqualTo(offset);
    }

    @Test
    void aCompactionOnOutOfMemoryThatMadeNoRoomIsNotRepeatedUntilSomethingChanged() {
        parts.buffer(DEVICE, 4 * MiB);

        assertThat(compactor.compactForRoom(DEVICE, MiB, 1, outOfMemory(DEVICE))).isFalse();
        assertThat(compactor.compactForRoom(DEVICE, MiB, 1, outOfMemory(DEVICE))).isFalse();
        assertThat(parts.events.compactions).as("the second was skipped").hasSize(1);

        BufferCore entered = parts.buffer(DEVICE, 4 * MiB);
        assertThat(compactor.compactForRoom(DEVICE, MiB, 1, outOfMemory(DEVICE))).isFalse();
        assertThat(parts.events.compactions).as("a buffer was entered").hasSize(2);

        entered.close(); // forgotten: another change, and a gap in front of nothing
        parts.buffer(DEVICE, 4 * MiB).close();
        BufferCore mover = behindAGap();
        long before = mover.ownBlock().offset();
        assertThat(compactor.compactForRoom(DEVICE, MiB, 1, outOfMemory(DEVICE))).as("a buffer moved: try again").isTrue();
        assertThat(mover.ownBlock().offset()).isLessThan(before);
    }

    @Test
    void aLargeMirrorGivenBackIsAChangeWhereItWasAndASmallOneIsNot() {
        LocationChain pinned = parts.chains.open(MemoryLocation.PINNED);
        assertThat(compactor.compactForRoom(MemoryLocation.PINNED, MiB, 1, outOfMemory(MemoryLocation.PINNED))).isFalse();
        int compactions = parts.events.compactions.size();

        compactor.mirrorReturned(pinned, parts.block(MemoryLocation.PINNED, 4096));
        assertThat(compactor.compactForRoom(MemoryLocation.PINNED, MiB, 1, outOfMemory(MemoryLocation.PINNED))).isFalse();
        assertThat(parts.events.compactions).as("a small mirror changes nothing").hasSize(compactions);

        compactor.mirrorReturned(pinned, parts.block(MemoryLocation.PINNED, 4 * MiB));
        compactor.compactForRoom(MemoryLocation.PINNED, MiB, 1, outOfMemory(MemoryLocation.PINNED));
        assertThat(parts.events.compactions).hasSize(compactions + 1);
    }

    @Test
    void aMoveTheDeviceRefusedMakesNoRoomAndTheOutOfMemorySaysWhy() {
        BufferCore buffer = behindAGap();
        fill(buffer, (byte) 3);
        long offset = buffer.ownBlock().offset();
        backend.failCopy(1);
        DeviceOutOfMemoryException failure = outOfMemory(DEVICE);

        try (LogCapture log = LogCapture.managerLog()) {
            assertThat(compactor.compactForRoom(DEVICE, MiB, 1, failure)).isFalse();

            assertThat(log.atLeast(Level.WARNING)).filteredOn(record -> record.getMessage().contains("compaction"))
                    .singleElement().satisfies(record -> {
                        assertThat(record.getMessage()).isEqualTo("the compaction of DEVICE on out-of-memory failed");
                        assertThat(record.getThrown()).isInstanceOf(FaultInjectingBackend.InjectedFault.class);
                    });
        }
        assertThat(failure.getSuppressed()).singleElement().isInstanceOf(FaultInjectingBackend.InjectedFault.class);
        assertThat(buffer.ownBlock().offset()).as("left where it was").isEqualTo(offset);
        assertThat(contents(buffer)).containsOnly((byte) 3);
        backend.failCopy(1);
        assertThatThrownBy(() -> compactor.compact(DEVICE)).as("a compaction asked for fails as it failed")
                .isInstanceOf(FaultInjectingBackend.InjectedFault.class);
    }

    @Test
    void onceTheManagerIsClosedACompactionOnOutOfMemoryFailsAsTheAllocationDoes() {
        parts.gate.close();

        assertThatThrownBy(() -> compactor.compactForRoom(DEVICE, MiB, 1, outOfMemory(DEVICE))).isInstanceOf(IllegalStateException.class)
                .hasMessage("this UnifiedMemoryManager is closed");
    }

    @Test
    void whileAMirrorIsAllocatedACompactionMovesNothing() throws Exception {
        BufferCore buffer = behindAGap();
        long offset = buffer.ownBlock().offset();

        boolean room = compactor.allocatingMirror(() -> compactor.compactForRoom(DEVICE, MiB, 1, outOfMemory(DEVICE)));
        CompactionReport report = compactor.allocatingMirror(() -> compactor.compact(DEVICE));

        assertThat(room).isFalse();
        assertThat(parts.events.compactions).as("the handler tried none").containsExactly(report);
        assertThat(report.buffersMoved()).isZero();
        assertThat(buffer.ownBlock().offset()).isEqualTo(offset);
        assertThat(compactor.compactForRoom(DEVICE, MiB, 1, outOfMemory(DEVICE))).as("not marked fruitless meanwhile").isTrue();
    }

    @Test
    void everyLocationIsCompactedInTurn() {
        assertThat(compactor.compactAll()).extracting(CompactionReport::location).containsExactlyElementsOf(parts.chains.locations());
    }

    @Test
    void aLocationWithoutAPoolHasNothingToMoveAndNothingIsTold() {
        try (ManagerParts unpooled = ManagerParts.on(new SimulatedDiscreteBackend()).settings(set -> set.poolingEnabled(false)).build()) {
            unpooled.buffer(DEVICE, 4 * MiB);

            CompactionReport report = unpooled.compactor.compact(DEVICE);

            assertThat(report.buffersMoved()).isZero();
            assertThat(report.bytesReleased()).isZero();
            assertThat(report.reservedBytesBefore()).isEqualTo(4 * MiB).isEqualTo(report.reservedBytesAfter());
            assertThat(unpooled.events.compactions).isEmpty();
        }
    }
}
