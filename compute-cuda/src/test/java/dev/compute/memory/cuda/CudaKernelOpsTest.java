package dev.compute.memory.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import dev.compute.memory.DataType;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.spi.NativeAllocation;
import dev.compute.memory.spi.Region;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Each kernel against a Java reference on random data, for float and double, at lengths around the block size
 * and the grid cap, at an element offset into the allocation, in every device-visible location. fill, scale and
 * axpy must match exactly (the reference does the same single roundings, fma included); sum within rounding of
 * a double sum in another order.
 */
class CudaKernelOpsTest {

    private static final long OFFSET_ELEMENTS = 3;
    private final Random random = new Random(11);
    private CudaBackend backend;

    @BeforeEach
    void open() {
        backend = CudaTestSupport.openBackend();
    }

    @AfterEach
    void close() {
        if (backend != null) {
            backend.close();
        }
    }

    /** The values at element {@link #OFFSET_ELEMENTS} of an allocation one element longer, zero around them. */
    private NativeAllocation upload(MemoryLocation location, DataType type, double[] values) {
        long elements = values.length + OFFSET_ELEMENTS + 1;
        NativeAllocation allocation = backend.allocate(location, type.bytesFor(elements));
        MemorySegment host = MemorySegment.ofArray(new byte[(int) type.bytesFor(elements)]);
        for (int i = 0; i < values.length; i++) {
            if (type == DataType.FLOAT32) {
                host.setAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, i + OFFSET_ELEMENTS, (float) values[i]);
            } else {
                host.setAtIndex(ValueLayout.JAVA_DOUBLE_UNALIGNED, i + OFFSET_ELEMENTS, values[i]);
            }
        }
        backend.copyToDevice(host, allocation, 0, host.byteSize());
        return allocation;
    }

    /** The index of the first element that is not what {@code expected} says, or -1. */
    private static int firstMismatch(double[] got, java.util.function.IntToDoubleFunction expected) {
        for (int i = 0; i < got.length; i++) {
            if (Double.compare(got[i], expected.applyAsDouble(i)) != 0) {
                return i;
            }
        }
        return -1;
    }

    /** Whether the elements just before and just after the region are still zero. */
    private boolean marginsUntouched(NativeAllocation allocation, DataType type, int n) {
        MemorySegment element = MemorySegment.ofArray(new byte[type.byteSize()]);
        backend.copyToHost(allocation, type.bytesFor(OFFSET_ELEMENTS - 1), element, type.byteSize());
        boolean before = element.mismatch(MemorySegment.ofArray(new byte[type.byteSize()])) == -1;
        backend.copyToHost(allocation, type.bytesFor(OFFSET_ELEMENTS + n), element, type.byteSize());
        return before && element.mismatch(MemorySegment.ofArray(new byte[type.byteSize()])) == -1;
    }

    private double[] download(NativeAllocation allocation, DataType type, int n) {
        MemorySegment host = MemorySegment.ofArray(new byte[(int) type.bytesFor(n)]);
        backend.copyToHost(allocation, type.bytesFor(OFFSET_ELEMENTS), host, host.byteSize());
        double[] out = new double[n];
        for (int i = 0; i < n; i++) {
            out[i] = type == DataType.FLOAT32 ? host.getAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, i) : host.getAtIndex(ValueLayout.JAVA_DOUBLE_UNALIGNED, i);
        }
        return out;
    }

    private static Region region(NativeAllocation allocation, DataType type, int n) {
        return new Region(allocation, type.bytesFor(OFFSET_ELEMENTS), n, type);
    }

    private double[] random(int n) {
        double[] values = new double[n];
        for (int i = 0; i < n; i++) {
            values[i] = random.nextDouble() * 200 - 100;
        }
        return values;
    }

    private static double stored(DataType type, double v) {
        return type == DataType.FLOAT32 ? (float) v : v;
    }

    @Test
    void eachOpMatchesTheJavaReference() {
        for (MemoryLocation location : List.of(MemoryLocation.DEVICE, MemoryLocation.UNIFIED, MemoryLocation.PINNED)) {
            for (DataType type : List.of(DataType.FLOAT32, DataType.FLOAT64)) {
                for (int n : new int[] {1, 255, 256, 257, 10_007, CudaKernelOps.BLOCK * CudaKernelOps.MAX_GRID + 9}) {
                    String what = location + " " + type + " n=" + n;
                    double[] x = random(n);
                    double[] y = random(n);
                    NativeAllocation ax = upload(location, type, x);
                    NativeAllocation ay = upload(location, type, y);
                    try {
                        double alpha = 1.7;
                        backend.ops().axpy(alpha, region(ax, type, n), region(ay, type, n)).join();
                        int axpyMismatch = firstMismatch(download(ay, type, n), i -> type == DataType.FLOAT32
                                ? Math.fma((float) alpha, (float) x[i], (float) y[i])
                                : Math.fma(alpha, x[i], y[i]));
                        assertThat(axpyMismatch).as("first wrong axpy element, %s", what).isEqualTo(-1);
                        assertThat(marginsUntouched(ay, type, n)).as("axpy stays inside, %s", what).isTrue();

                        backend.ops().scale(region(ax, type, n), -0.3).join();
                        double[] scaled = new double[n];
                        double referenceSum = 0;
                        double magnitude = 0;
                        for (int i = 0; i < n; i++) {
                            scaled[i] = type == DataType.FLOAT32 ? (float) -0.3 * (float) x[i] : -0.3 * x[i];
                            referenceSum += scaled[i];
                            magnitude += Math.abs(scaled[i]);
                        }
                        assertThat(firstMismatch(download(ax, type, n), i -> scaled[i])).as("first wrong scale element, %s", what).isEqualTo(-1);

                        double sum = backend.ops().sum(region(ax, type, n)).join();
                        assertThat(sum).as("sum %s", what).isCloseTo(referenceSum, within(1e-11 * magnitude));

                        backend.ops().fill(region(ax, type, n), 0.1).join();
                        assertThat(firstMismatch(download(ax, type, n), i -> stored(type, 0.1))).as("first wrong fill element, %s", what).isEqualTo(-1);
                        assertThat(marginsUntouched(ax, type, n)).as("fill stays inside, %s", what).isTrue();
                    } finally {
                        backend.free(ax);
                        backend.free(ay);
                    }
                }
            }
        }
    }

    @Test
    void emptyRegionsCompleteAtOnce() {
        NativeAllocation a = backend.allocate(MemoryLocation.DEVICE, 64);
        try {
            Region empty = new Region(a, 0, 0, DataType.FLOAT32);
            assertThat(backend.ops().fill(empty, 1)).isDone();
            assertThat(backend.ops().sum(empty).join()).isZero();
        } finally {
            backend.free(a);
        }
    }

    @Test
    void manySumsInFlightEachGetTheirOwnResult() {
        int n = 100_000;
        NativeAllocation a = backend.allocate(MemoryLocation.DEVICE, DataType.FLOAT64.bytesFor(n));
        try {
            var futures = new java.util.ArrayList<java.util.concurrent.CompletableFuture<Double>>();
            for (int k = 1; k <= 20; k++) {
                backend.ops().fill(new Region(a, 0, n, DataType.FLOAT64), k);
                futures.add(backend.ops().sum(new Region(a, 0, n, DataType.FLOAT64)));
            }
            for (int k = 1; k <= 20; k++) {
                assertThat(futures.get(k - 1).join()).as("sum after fill %d", k).isEqualTo((double) k * n);
            }
        } finally {
            backend.free(a);
        }
    }
}
