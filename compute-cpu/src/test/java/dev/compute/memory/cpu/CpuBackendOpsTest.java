package dev.compute.memory.cpu;

import static java.lang.foreign.ValueLayout.JAVA_DOUBLE_UNALIGNED;
import static java.lang.foreign.ValueLayout.JAVA_FLOAT_UNALIGNED;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.DataType;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.spi.BackendSettings;
import dev.compute.memory.spi.KernelOps;
import dev.compute.memory.spi.NativeAllocation;
import dev.compute.memory.spi.Region;
import java.lang.foreign.MemorySegment;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** Every op against a plain Java loop on fresh random data, at odd lengths and odd (unaligned) offsets. */
class CpuBackendOpsTest {

    private static final long OFFSET = 3;

    private final CpuBackend backend = new CpuBackend(BackendSettings.ofDevice(0));
    private final KernelOps ops = backend.ops();
    private final Random random = new Random();

    @AfterEach
    void close() {
        backend.close();
    }

    @ParameterizedTest
    @ValueSource(ints = {1, 3, 7, 1001, 65_537})
    void float32MatchesTheReference(int n) {
        float[] x = randomFloats(n);
        float[] y = randomFloats(n);
        float alpha = (float) (random.nextDouble() * 4 - 2);
        NativeAllocation xa = backend.allocate(MemoryLocation.DEVICE, OFFSET + 4L * n);
        NativeAllocation ya = backend.allocate(MemoryLocation.HOST, OFFSET + 4L * n);
        try {
            Region xr = new Region(xa, OFFSET, n, DataType.FLOAT32);
            Region yr = new Region(ya, OFFSET, n, DataType.FLOAT32);
            write(xa, x);
            write(ya, y);

            assertDone(ops.axpy(alpha, xr, yr));
            for (int i = 0; i < n; i++) {
                y[i] = alpha * x[i] + y[i];
            }
            assertThat(readFloats(ya, n)).containsExactly(y);

            assertDone(ops.scale(xr, -0.75));
            for (int i = 0; i < n; i++) {
                x[i] = -0.75f * x[i];
            }
            assertThat(readFloats(xa, n)).containsExactly(x);

            double expected = 0;
            for (float v : x) {
                expected += v;
            }
            assertThat(ops.sum(xr).join()).isCloseTo(expected, org.assertj.core.api.Assertions.within(1e-9 * n));

            assertDone(ops.fill(yr, 2.5));
            assertThat(readFloats(ya, n)).containsOnly(2.5f);
            assertThat(ops.sum(yr).join()).isEqualTo(2.5 * n);
            assertDone(ops.fill(yr, 0.0));
            assertThat(readFloats(ya, n)).containsOnly(0f);
        } finally {
            backend.free(xa);
            backend.free(ya);
        }
    }

    @ParameterizedTest
    @ValueSource(ints = {1, 5, 999, 40_003})
    void float64MatchesTheReference(int n) {
        double[] x = randomDoubles(n);
        double[] y = randomDoubles(n);
        double alpha = random.nextDouble() * 4 - 2;
        NativeAllocation xa = backend.allocate(MemoryLocation.UNIFIED, OFFSET + 8L * n);
        NativeAllocation ya = backend.allocate(MemoryLocation.DEVICE, OFFSET + 8L * n);
        try {
            Region xr = new Region(xa, OFFSET, n, DataType.FLOAT64);
            Region yr = new Region(ya, OFFSET, n, DataType.FLOAT64);
            write(xa, x);
            write(ya, y);

            assertDone(ops.axpy(alpha, xr, yr));
            for (int i = 0; i < n; i++) {
                y[i] = alpha * x[i] + y[i];
            }
            assertThat(readDoubles(ya, n)).containsExactly(y);

            assertDone(ops.scale(xr, 1.25));
            double expected = 0;
            for (int i = 0; i < n; i++) {
                x[i] = 1.25 * x[i];
                expected += x[i];
            }
            assertThat(readDoubles(xa, n)).containsExactly(x);
            assertThat(ops.sum(xr).join()).isCloseTo(expected, org.assertj.core.api.Assertions.within(1e-12 * n));

            assertDone(ops.fill(xr, -0.0));
            assertThat(java.util.Arrays.stream(readDoubles(xa, n)).boxed()).as("negative zero, not zero bytes")
                    .allMatch(v -> Double.doubleToRawLongBits(v) == Double.doubleToRawLongBits(-0.0));
        } finally {
            backend.free(xa);
            backend.free(ya);
        }
    }

    @Test
    void opsTouchOnlyTheirRegion() {
        NativeAllocation a = backend.allocate(MemoryLocation.HOST, 64);
        try {
            MemorySegment s = a.hostSegment();
            s.fill((byte) 0x5A);
            Region middle = new Region(a, 8, 4, DataType.FLOAT64);
            ops.fill(middle, 1.0).join();
            ops.scale(middle, 3).join();
            assertThat(ops.sum(middle).join()).isEqualTo(12.0);
            assertThat(s.asSlice(0, 8).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE)).containsOnly((byte) 0x5A);
            assertThat(s.asSlice(40, 24).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE)).containsOnly((byte) 0x5A);
        } finally {
            backend.free(a);
        }
    }

    @Test
    void otherTypesAndMismatchedAxpyAreRefused() {
        NativeAllocation a = backend.allocate(MemoryLocation.HOST, 64);
        try {
            assertThatThrownBy(() -> ops.sum(new Region(a, 0, 16, DataType.INT32))).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("FLOAT32 and FLOAT64");
            assertThatThrownBy(() -> ops.axpy(1, new Region(a, 0, 4, DataType.FLOAT32), new Region(a, 16, 2, DataType.FLOAT64)))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("one type and length");
        } finally {
            backend.free(a);
        }
    }

    private static void assertDone(CompletableFuture<Void> work) {
        assertThat(work).isCompleted();
    }

    private float[] randomFloats(int n) {
        float[] f = new float[n];
        for (int i = 0; i < n; i++) {
            f[i] = random.nextFloat() * 2 - 1;
        }
        return f;
    }

    private double[] randomDoubles(int n) {
        double[] d = new double[n];
        for (int i = 0; i < n; i++) {
            d[i] = random.nextDouble() * 2 - 1;
        }
        return d;
    }

    private static void write(NativeAllocation a, float[] values) {
        MemorySegment.copy(values, 0, a.hostSegment(), JAVA_FLOAT_UNALIGNED, OFFSET, values.length);
    }

    private static void write(NativeAllocation a, double[] values) {
        MemorySegment.copy(values, 0, a.hostSegment(), JAVA_DOUBLE_UNALIGNED, OFFSET, values.length);
    }

    private static float[] readFloats(NativeAllocation a, int n) {
        float[] out = new float[n];
        MemorySegment.copy(a.hostSegment(), JAVA_FLOAT_UNALIGNED, OFFSET, out, 0, n);
        return out;
    }

    private static double[] readDoubles(NativeAllocation a, int n) {
        double[] out = new double[n];
        MemorySegment.copy(a.hostSegment(), JAVA_DOUBLE_UNALIGNED, OFFSET, out, 0, n);
        return out;
    }
}
