package dev.compute.sample;

import static dev.compute.sample.OpenClTestManagers.openClManager;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatIllegalStateException;

import dev.compute.memory.DataType;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import java.time.Duration;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The clamp on the CPU backend (its Java source) at every location and on a slice, and on OpenCL's DEVICE memory
 * (its OpenCL C source, PoCL in CI, which installs it and sets {@code CI}; elsewhere that test skips without a platform).
 */
class ClampKernelTests {

    private static UnifiedMemoryManager cpu;
    private static ClampKernel kernel;

    @BeforeAll
    static void cpuManager() {
        cpu = UnifiedMemoryManager.builder().backend("cpu").timelineInterval(Duration.ZERO).build();
        kernel = new ClampKernel(cpu);
    }

    @AfterAll
    static void close() {
        cpu.close();
    }

    @ParameterizedTest
    @EnumSource(MemoryLocation.class)
    void clampsEveryElementInPlace(MemoryLocation location) {
        try (UnifiedBuffer values = cpu.allocate(DataType.FLOAT64, 5, location)) {
            values.copyFrom(new double[] {-3, -0.5, 0.25, 1, 7});
            kernel.clamp(values, -1, 0.5);
            double[] result = new double[5];
            values.copyTo(result);
            assertThat(result).containsExactly(-1, -0.5, 0.25, 0.5, 0.5);
        }
    }

    @Test
    void clampsOnlyTheElementsOfASlice() {
        try (UnifiedBuffer values = cpu.allocate(DataType.FLOAT64, 6)) {
            values.copyFrom(new double[] {9, 9, 9, 9, 9, 9});
            try (UnifiedBuffer middle = values.slice(2, 3)) {
                kernel.clamp(middle, 0, 1);
            }
            double[] result = new double[6];
            values.copyTo(result);
            assertThat(result).containsExactly(9, 9, 1, 1, 1, 9);
        }
    }

    @Test
    void refusesAClosedBuffer() {
        UnifiedBuffer values = cpu.allocate(DataType.FLOAT64, 4);
        values.close();
        assertThatIllegalStateException().isThrownBy(() -> kernel.clamp(values, 0, 1)).withMessageContaining("kernel 'clamp_f64', argument 0");
    }

    @Test
    void clampsOnOpenClDeviceMemoryAndCopyToSeesItWithoutASync() {
        try (UnifiedMemoryManager manager = openClManager();
             UnifiedBuffer padding = manager.allocate(DataType.FLOAT64, 100, MemoryLocation.DEVICE);
             UnifiedBuffer values = manager.allocate(DataType.FLOAT64, 3000, MemoryLocation.DEVICE)) {
            ClampKernel onOpenCl = new ClampKernel(manager);
            double[] input = new double[3000];
            for (int i = 0; i < input.length; i++) {
                input[i] = i - 1500;
            }
            values.copyFrom(input);
            onOpenCl.clamp(values, -10, 20);
            assertThat(values.state().deviceIsNewer()).isTrue();
            double[] result = new double[3000];
            values.copyTo(result);
            for (int i = 0; i < input.length; i++) {
                assertThat(result[i]).as("element %d", i).isEqualTo(Math.clamp(input[i], -10, 20));
            }

            try (UnifiedBuffer middle = values.slice(1490, 30)) { // 11920 bytes in: no sub-buffer starts there, the slice is staged
                onOpenCl.clamp(middle, 0, 5);
            }
            values.copyTo(result);
            assertThat(result[1489]).isEqualTo(-10);
            assertThat(result[1490]).isEqualTo(0);
            assertThat(result[1519]).isEqualTo(5);
            assertThat(result[1520]).isEqualTo(20);
            assertThat(padding.isClosed()).isFalse();
        }
    }
}
