package dev.compute.sample;

import static dev.compute.sample.OpenClTestManagers.openClManager;
import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.BufferState;
import dev.compute.memory.DataType;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import org.junit.jupiter.api.Test;

/**
 * The clamp for backends without a kernel of the service's own, on memory the host cannot address: OpenCL's
 * DEVICE memory (PoCL in CI, which installs it and sets {@code CI}; elsewhere the test skips without a platform).
 */
class HostCopyClampKernelTests {

    private final ClampKernel kernel = new HostCopyClampKernel();

    @Test
    void clampsTheHostCopyOfDeviceMemoryAndTheDeviceSeesTheResult() {
        try (UnifiedMemoryManager manager = openClManager();
             UnifiedBuffer values = manager.allocate(DataType.FLOAT64, 4, MemoryLocation.DEVICE)) {
            values.copyFrom(new double[] {-2, 0.5, 3, 10});
            assertThat(values.state().deviceIsNewer()).as("the kernel must bring the device copy over first").isTrue();

            kernel.clamp(values, 0, 4);

            assertThat(values.state()).isEqualTo(BufferState.HOST_DIRTY);
            manager.ops().scale(values, 2); // on the device, after the clamped host copy went back
            double[] result = new double[4];
            values.copyTo(result);
            assertThat(result).containsExactly(0, 1, 6, 8);
        }
    }
}
