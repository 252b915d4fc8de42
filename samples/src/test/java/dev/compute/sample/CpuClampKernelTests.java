package dev.compute.sample;

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

/** The CPU backend's clamp: the Java loop on a device access's segment, at every location and on a slice. */
class CpuClampKernelTests {

    private static UnifiedMemoryManager manager;
    private final ClampKernel kernel = new CpuClampKernel();

    @BeforeAll
    static void cpuManager() {
        manager = UnifiedMemoryManager.builder().backend("cpu").timelineInterval(Duration.ZERO).build();
    }

    @AfterAll
    static void close() {
        manager.close();
    }

    @ParameterizedTest
    @EnumSource(MemoryLocation.class)
    void clampsEveryElementInPlace(MemoryLocation location) {
        try (UnifiedBuffer values = manager.allocate(DataType.FLOAT64, 5, location)) {
            values.copyFrom(new double[] {-3, -0.5, 0.25, 1, 7});
            kernel.clamp(values, -1, 0.5);
            double[] result = new double[5];
            values.copyTo(result);
            assertThat(result).containsExactly(-1, -0.5, 0.25, 0.5, 0.5);
        }
    }

    @Test
    void clampsOnlyTheElementsOfASlice() {
        try (UnifiedBuffer values = manager.allocate(DataType.FLOAT64, 6)) {
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
        UnifiedBuffer values = manager.allocate(DataType.FLOAT64, 4);
        values.close();
        assertThatIllegalStateException().isThrownBy(() -> kernel.clamp(values, 0, 1));
    }
}
