package dev.compute.memory;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import dev.compute.memory.testing.LogCapture;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.logging.Level;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** The buffer state machine on a discrete device, with every copy the backend made counted. */
class UnifiedBufferStateTest {

    private final SimulatedDiscreteBackend device = new SimulatedDiscreteBackend();
    private final UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(device)
            .leakDetection(LeakDetectionLevel.DISABLED).timelineInterval(Duration.ZERO).build();

    @AfterEach
    void close() {
        manager.close();
    }

    private long h2d() {
        return device.hostToDeviceCopies();
    }

    private long d2h() {
        return device.deviceToHostCopies();
    }

    @Test
    void arrayWritesGoToTheDeviceAndNeedNoSync() {
        try (UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 4, MemoryLocation.DEVICE)) {
            assertThat(buffer.state()).isEqualTo(BufferState.UNINITIALIZED);
            buffer.copyFrom(new float[] {1, 2, 3, 4});
            assertThat(buffer.state()).isEqualTo(BufferState.DEVICE_ONLY);
            assertThat(h2d()).isEqualTo(1);
            buffer.syncToDevice();
            buffer.syncToHost();
            assertThat(buffer.state()).isEqualTo(BufferState.SYNCHRONIZED);
            assertThat(d2h()).isEqualTo(1);
            assertThat(h2d()).isEqualTo(1);
        }
    }

    @Test
    void aWritableViewMakesTheHostNewerAndOpsSyncItOnce() {
        try (UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 4, MemoryLocation.DEVICE)) {
            MemorySegment view = buffer.hostView();
            assertThat(buffer.state()).isEqualTo(BufferState.HOST_ONLY);
            assertThat(d2h()).isZero();
            for (int i = 0; i < 4; i++) {
                view.setAtIndex(ValueLayout.JAVA_FLOAT, i, i + 1);
            }
            assertThat(manager.ops().sum(buffer)).isEqualTo(10.0);
            assertThat(buffer.state()).isEqualTo(BufferState.SYNCHRONIZED);
            assertThat(h2d()).isEqualTo(1);
            assertThat(manager.ops().sum(buffer)).isEqualTo(10.0);
            assertThat(h2d()).as("no second sync for an unchanged host copy").isEqualTo(1);
        }
    }

    @Test
    void deviceWorkMakesTheDeviceNewerAndAReadOnlyViewPullsItWithoutDirtyingTheHost() {
        try (UnifiedBuffer buffer = manager.allocate(DataType.FLOAT64, 3, MemoryLocation.DEVICE)) {
            buffer.hostView().fill((byte) 0);
            manager.ops().fill(buffer, 2.0);
            assertThat(buffer.state()).isEqualTo(BufferState.DEVICE_DIRTY);
            MemorySegment readOnly = buffer.readOnlyHostView();
            assertThat(readOnly.getAtIndex(ValueLayout.JAVA_DOUBLE, 2)).isEqualTo(2.0);
            assertThat(buffer.state()).isEqualTo(BufferState.SYNCHRONIZED);
            long uploads = h2d();
            manager.ops().sum(buffer);
            assertThat(h2d()).as("a read-only view does not make the host newer").isEqualTo(uploads);
        }
    }

    @Test
    void writesGoToTheNewerCopySoNothingIsLost() {
        try (UnifiedBuffer buffer = manager.allocate(DataType.INT32, 4, MemoryLocation.DEVICE)) {
            buffer.hostView().setAtIndex(ValueLayout.JAVA_INT, 0, 7);
            buffer.copyFrom(4, new int[] {8}, 0, 1);
            assertThat(buffer.state()).isEqualTo(BufferState.HOST_ONLY);
            assertThat(h2d()).as("the write went to the newer host copy").isZero();
            int[] back = new int[2];
            buffer.copyTo(back);
            assertThat(back).containsExactly(7, 8);
            buffer.syncToDevice();
            assertThat(buffer.state()).isEqualTo(BufferState.SYNCHRONIZED);
            buffer.copyFrom(8, new int[] {9}, 0, 1);
            assertThat(buffer.state()).isEqualTo(BufferState.DEVICE_DIRTY);
            buffer.syncToHost();
            assertThat(buffer.readOnlyHostView().getAtIndex(ValueLayout.JAVA_INT, 2)).isEqualTo(9);
            assertThat(buffer.readOnlyHostView().getAtIndex(ValueLayout.JAVA_INT, 0)).isEqualTo(7);
        }
    }

    @Test
    void hostAccessibleMemoryHasOneCopyAndSyncsCopyNothing() {
        for (MemoryLocation location : new MemoryLocation[] {MemoryLocation.HOST, MemoryLocation.PINNED, MemoryLocation.UNIFIED}) {
            try (UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 4, location)) {
                buffer.copyFrom(new float[] {1, 1, 1, 1});
                assertThat(buffer.state()).isEqualTo(BufferState.SYNCHRONIZED);
                buffer.hostView().setAtIndex(ValueLayout.JAVA_FLOAT, 0, 5);
                buffer.syncToDevice();
                buffer.syncToHost();
                assertThat(manager.ops().sum(buffer)).isEqualTo(8.0);
                assertThat(buffer.state()).isEqualTo(BufferState.SYNCHRONIZED);
            }
        }
        assertThat(h2d() + d2h()).isZero();
    }

    @Test
    void theMirrorComesFromPinnedMemoryAndGoesBackOnClose() {
        UnifiedBuffer buffer = manager.allocate(1 << 16, MemoryLocation.DEVICE);
        buffer.hostView();
        assertThat(manager.statistics(MemoryLocation.PINNED).allocatedBytes()).isEqualTo(1 << 16);
        buffer.close();
        assertThat(manager.statistics(MemoryLocation.PINNED).allocatedBytes()).isZero();
        assertThat(manager.statistics(MemoryLocation.DEVICE).liveBuffers()).isZero();
    }

    @Test
    void aHostMirrorCountsInItsLocationsBytesButIsNoBufferOfTheUsers() {
        UnifiedBuffer buffer = manager.allocate(1 << 16, MemoryLocation.DEVICE);
        buffer.hostView();

        MemoryStatistics pinned = manager.statistics(MemoryLocation.PINNED);
        assertThat(pinned.allocatedBytes()).as("the mirror is memory the pool holds").isEqualTo(1 << 16);
        assertThat(pinned.liveBuffers()).as("but no buffer opened there").isZero();
        assertThat(manager.statistics().values().stream().mapToLong(MemoryStatistics::liveBuffers).sum()).isEqualTo(1);
        assertThat(manager.liveBuffers()).singleElement().extracting(LiveBufferReport::location).isEqualTo(MemoryLocation.DEVICE);

        try (LogCapture log = LogCapture.managerLog()) {
            manager.close();
            assertThat(log.messages(Level.WARNING)).singleElement().asString().contains("closed with 1 buffer(s) still open");
        }
        assertThat(manager.statistics(MemoryLocation.PINNED).allocatedBytes()).isZero();
    }

    @Test
    void copiedBytesAreCountedPerDirection() {
        try (UnifiedBuffer a = manager.allocate(1000, MemoryLocation.DEVICE); UnifiedBuffer b = manager.allocate(1000, MemoryLocation.DEVICE)) {
            a.copyFrom(new byte[1000]);
            b.copyFrom(a, 0, 0, 600);
            a.copyTo(0, new byte[10], 0, 10);
            MemoryStatistics s = manager.statistics(MemoryLocation.DEVICE);
            assertThat(s.bytesHostToDevice()).isEqualTo(1000);
            assertThat(s.bytesDeviceToDevice()).isEqualTo(600);
            assertThat(s.bytesDeviceToHost()).isEqualTo(10);
            assertThat(device.deviceToDeviceCopies()).isEqualTo(1);
        }
    }

    @Test
    void viewsBecomeInaccessibleWhenTheManagerCloses() {
        UnifiedMemoryManager own = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend())
                .timelineInterval(Duration.ZERO).build();
        MemorySegment view = own.allocate(64, MemoryLocation.HOST).hostView();
        own.close();
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> view.get(ValueLayout.JAVA_BYTE, 0))
                .isInstanceOf(IllegalStateException.class);
    }
}
