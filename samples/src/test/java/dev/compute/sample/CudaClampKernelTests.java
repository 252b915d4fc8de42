package dev.compute.sample;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

import dev.compute.memory.BackendUnavailableException;
import dev.compute.memory.DataType;
import dev.compute.memory.KernelSource;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import java.time.Duration;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * The clamp's PTX source on a GPU: skipped with the reason where the cuda backend is not available, failed instead
 * where {@code COMPUTE_REQUIRE_CUDA} is set (the GPU machine's runs).
 */
class CudaClampKernelTests {

    @Test
    void clampsOnCudaDeviceMemoryAndOnASlice() {
        UnifiedMemoryManager manager = null;
        try {
            manager = UnifiedMemoryManager.builder().backend("cuda").timelineInterval(Duration.ZERO).build();
        } catch (BackendUnavailableException e) {
            if (System.getenv("COMPUTE_REQUIRE_CUDA") != null) {
                fail("COMPUTE_REQUIRE_CUDA is set, but: " + e.reason());
            }
            Assumptions.abort("no CUDA here: " + e.reason());
        }
        try (UnifiedMemoryManager cuda = manager; UnifiedBuffer values = cuda.allocate(DataType.FLOAT64, 3000, MemoryLocation.DEVICE)) {
            ClampKernel kernel = new ClampKernel(cuda);
            assertThat(kernel.source()).isEqualTo(KernelSource.ptx(ClampKernel.PTX, "clamp_f64"));
            double[] input = new double[3000];
            for (int i = 0; i < input.length; i++) {
                input[i] = i - 1500;
            }
            values.copyFrom(input);
            kernel.clamp(values, -10, 20);
            try (UnifiedBuffer middle = values.slice(1490, 30)) {
                kernel.clamp(middle, 0, 5);
            }
            double[] result = new double[3000];
            values.copyTo(result);
            for (int i = 0; i < input.length; i++) {
                double expected = i >= 1490 && i < 1520 ? Math.clamp(input[i], 0, 5) : Math.clamp(input[i], -10, 20);
                assertThat(result[i]).as("element %d", i).isEqualTo(expected);
            }
        }
    }
}
