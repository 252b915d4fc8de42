package dev.compute.memory.cpu;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.BufferState;
import dev.compute.memory.DataType;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemoryStatistics;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** The CPU backend as a user meets it: through the manager's builder, by name. */
class CpuMemoryManagerTest {

    @Test
    void allocateWriteComputeReadClose() {
        UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend("cpu").timelineInterval(Duration.ZERO).build();
        try (manager) {
            assertThat(manager.backendInfo().backend()).isEqualTo("cpu");
            assertThat(manager.defaultLocation()).isEqualTo(MemoryLocation.HOST);
            assertThat(manager.locations()).containsExactly(MemoryLocation.values());
            assertThat(manager.deviceMemory().totalBytes()).isPositive();

            try (UnifiedBuffer x = manager.allocate(DataType.FLOAT32, 1001, MemoryLocation.DEVICE);
                 UnifiedBuffer y = manager.allocate(DataType.FLOAT32, 1001, MemoryLocation.PINNED)) {
                float[] values = new float[1001];
                for (int i = 0; i < values.length; i++) {
                    values[i] = i;
                }
                x.copyFrom(values);
                manager.ops().fill(y, 1.0);
                manager.ops().axpy(2.0, x, y);
                manager.ops().scale(y, 0.5);
                assertThat(manager.ops().sum(y)).isEqualTo((1001 * 1000 + 1001) / 2.0);

                float[] back = new float[1001];
                y.copyTo(back);
                assertThat(back[1000]).isEqualTo(1000.5f);
                assertThat(y.isHostAccessible()).isTrue();
                assertThat(y.state()).isEqualTo(BufferState.SYNCHRONIZED);
                MemorySegment view = y.readOnlyHostView();
                assertThat(view.getAtIndex(ValueLayout.JAVA_FLOAT, 3)).isEqualTo(3.5f);
            }
            for (MemoryLocation location : manager.locations()) {
                MemoryStatistics s = manager.statistics(location);
                assertThat(s.allocatedBytes()).as("%s", location).isZero();
                assertThat(s.liveBuffers()).as("%s", location).isZero();
            }
        }
        assertThat(manager.isClosed()).isTrue();
    }
}
