package dev.compute.sample;

import static dev.compute.sample.OpenClTestManagers.openClManager;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.BufferState;
import dev.compute.memory.DataType;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import org.junit.jupiter.api.Test;

/**
 * The service's own OpenCL C kernel on pooled DEVICE memory, launched on the device access's handle (PoCL in CI,
 * which installs it and sets {@code CI}; elsewhere the test skips without a platform).
 */
class OpenClClampKernelTests {

    @Test
    void clampsOnTheDeviceAndCopyToSeesItWithoutASync() {
        try (UnifiedMemoryManager manager = openClManager();
             OpenClClampKernel kernel = new OpenClClampKernel();
             UnifiedBuffer padding = manager.allocate(DataType.FLOAT64, 100, MemoryLocation.DEVICE);
             UnifiedBuffer values = manager.allocate(DataType.FLOAT64, 3000, MemoryLocation.DEVICE)) {
            double[] input = new double[3000];
            for (int i = 0; i < input.length; i++) {
                input[i] = i - 1500;
            }
            values.copyFrom(input);
            kernel.clamp(values, -10, 20);
            assertThat(values.state().deviceIsNewer()).isTrue();
            double[] result = new double[3000];
            values.copyTo(result);
            for (int i = 0; i < input.length; i++) {
                assertThat(result[i]).as("element %d", i).isEqualTo(Math.clamp(input[i], -10, 20));
            }

            UnifiedBuffer middle = values.slice(1490, 30); // an element offset: no sub-buffer at this origin
            kernel.clamp(middle, 0, 5);
            values.copyTo(result);
            assertThat(result[1489]).isEqualTo(-10);
            assertThat(result[1490]).isEqualTo(0);
            assertThat(result[1519]).isEqualTo(5);
            assertThat(result[1520]).isEqualTo(20);
            assertThat(values.state()).isNotEqualTo(BufferState.HOST_DIRTY);
        }
    }

    @Test
    void aReleasedKernelRefusesClearly() {
        try (UnifiedMemoryManager manager = openClManager();
             UnifiedBuffer values = manager.allocate(DataType.FLOAT64, 4, MemoryLocation.DEVICE)) {
            OpenClClampKernel kernel = new OpenClClampKernel();
            kernel.close();
            assertThatThrownBy(() -> kernel.clamp(values, 0, 1)).isInstanceOf(IllegalStateException.class).hasMessageContaining("released");
        }
    }
}
