package dev.compute.memory.cuda;

import static jcuda.driver.JCudaDriver.cuEventCreate;
import static jcuda.driver.JCudaDriver.cuEventDestroy;
import static jcuda.driver.JCudaDriver.cuEventQuery;
import static jcuda.driver.JCudaDriver.cuEventRecord;
import static jcuda.driver.JCudaDriver.cuLaunchKernel;
import static jcuda.driver.JCudaDriver.cuStreamCreate;
import static jcuda.driver.JCudaDriver.cuStreamDestroy;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.AccessMode;
import dev.compute.memory.BufferAccess;
import dev.compute.memory.BufferState;
import dev.compute.memory.DataType;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.IntToDoubleFunction;
import jcuda.Pointer;
import jcuda.driver.CUevent;
import jcuda.driver.CUevent_flags;
import jcuda.driver.CUfunction;
import jcuda.driver.CUresult;
import jcuda.driver.CUstream;
import jcuda.driver.CUstream_flags;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * One's own kernel on pooled memory, as a user launches it: {@code buffer.deviceAccess(mode)}, then
 * {@code access.handle(CudaDeviceHandle.class)} and JCuda's {@code cuLaunchKernel} on its pointer and stream, the
 * results read back with {@code copyTo}. The kernel ({@code scale_add_index} in {@code src/test/cuda/test-kernels.cu})
 * writes {@code 2 x[i] + i}, so a launch at a wrong address, offset or length shows in the data. Skips without a GPU.
 */
class CudaDeviceHandleTest {

    private static final String TEST_KERNELS = "/dev/compute/memory/cuda/test-kernels.ptx";
    private static final int BLOCK = 256;

    private CudaBackend backend;
    private UnifiedMemoryManager manager;
    private PtxModule kernels;
    private CUfunction scaleAddIndex;
    private CUfunction spin;

    @BeforeEach
    void open() {
        backend = CudaTestSupport.openBackend();
        manager = CudaTestSupport.managerOn(backend).build();
        kernels = backend.loadModule(TEST_KERNELS);
        scaleAddIndex = kernels.function("scale_add_index");
        spin = kernels.function("spin");
    }

    @AfterEach
    void close() {
        if (kernels != null) {
            kernels.close();
        }
        if (manager != null) {
            manager.close();
        }
    }

    /** {@code x[i] = scale * x[i] + i} for the access's elements, queued on {@code stream}. */
    private void scaleAddIndex(CudaDeviceHandle cuda, CUstream stream, float scale) {
        long n = cuda.byteSize() / Float.BYTES;
        int blocks = (int) Math.min(4096, Math.ceilDiv(n, BLOCK));
        CudaResults.check(cuLaunchKernel(scaleAddIndex, blocks, 1, 1, BLOCK, 1, 1, 0, stream,
                Pointer.to(Pointer.to(cuda.pointer()), Pointer.to(new long[] {n}), Pointer.to(new float[] {scale})), null),
                "cuLaunchKernel(scale_add_index)");
    }

    /** One thread busy for {@code cycles} clock cycles on {@code stream}: what is queued behind it waits. */
    private void spin(CUstream stream, long cycles) {
        CudaResults.check(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, stream, Pointer.to(Pointer.to(new long[] {cycles})), null),
                "cuLaunchKernel(spin)");
    }

    /** Whole numbers below 1000: exact in float, so the kernel's results can be compared exactly. */
    private static float[] data(int n) {
        float[] values = new float[n];
        for (int i = 0; i < n; i++) {
            values[i] = (i * 7919) % 1000;
        }
        return values;
    }

    /** The index of the first element of {@code got} that is not {@code expected}, or -1. */
    private static int firstMismatch(float[] got, IntToDoubleFunction expected) {
        for (int i = 0; i < got.length; i++) {
            if (got[i] != (float) expected.applyAsDouble(i)) {
                return i;
            }
        }
        return -1;
    }

    @Test
    void aKernelOfOnesOwnWritesAPooledBufferInEveryLocationItCanReach() {
        int n = 100_003;
        float[] x = data(n);
        for (MemoryLocation location : List.of(MemoryLocation.DEVICE, MemoryLocation.PINNED, MemoryLocation.UNIFIED)) {
            try (UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, n, location)) {
                buffer.copyFrom(x);
                try (BufferAccess access = buffer.deviceAccess(AccessMode.READ_WRITE)) {
                    CudaDeviceHandle cuda = access.handle(CudaDeviceHandle.class);
                    assertThat(cuda.address() % 512).as("%s: the pool's blocks start at multiples of 512 bytes", location).isZero();
                    assertThat(cuda.byteSize()).isEqualTo(buffer.byteSize());
                    assertThat(cuda.deviceOrdinal()).isZero();
                    assertThat(cuda.stream()).as("this thread's stream").isSameAs(backend.enter());
                    scaleAddIndex(cuda, cuda.stream(), 2);
                }
                float[] back = new float[n];
                buffer.copyTo(back);
                assertThat(firstMismatch(back, i -> 2 * x[i] + i)).as("first wrong element in %s", location).isEqualTo(-1);
            }
        }
    }

    @Test
    void aSliceIsReachedAtItsByteOffset() {
        int n = 10_000;
        int from = 1_000;
        int count = 5_000;
        float[] x = data(n);
        try (UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, n, MemoryLocation.DEVICE)) {
            buffer.copyFrom(x);
            long bufferOffset;
            long bufferAddress;
            try (BufferAccess whole = buffer.deviceAccess(AccessMode.READ)) {
                bufferOffset = whole.offset();
                bufferAddress = whole.handle(CudaDeviceHandle.class).address();
            }
            try (UnifiedBuffer slice = buffer.slice(from, count);
                 BufferAccess access = slice.deviceAccess(AccessMode.READ_WRITE)) {
                assertThat(slice.byteOffset()).isEqualTo(from * (long) Float.BYTES);
                assertThat(access.offset()).isEqualTo(bufferOffset + slice.byteOffset());
                CudaDeviceHandle cuda = access.handle(CudaDeviceHandle.class);
                assertThat(cuda.address()).isEqualTo(bufferAddress + slice.byteOffset());
                assertThat(cuda.byteSize()).isEqualTo(count * (long) Float.BYTES);
                scaleAddIndex(cuda, cuda.stream(), 2);
            }
            float[] back = new float[n];
            buffer.copyTo(back);
            assertThat(firstMismatch(back, i -> i >= from && i < from + count ? 2 * x[i] + (i - from) : x[i]))
                    .as("first wrong element: inside the slice 2x + its own index, outside untouched").isEqualTo(-1);
        }
    }

    @Test
    void aHostWriteReachesTheKernelAndTheKernelsWriteReachesCopyToWithoutAnExplicitSync() {
        int n = 65_537;
        float[] x = data(n);
        try (UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, n, MemoryLocation.DEVICE)) {
            MemorySegment view = buffer.hostView();
            MemorySegment.copy(MemorySegment.ofArray(x), 0, view, 0, view.byteSize());
            assertThat(buffer.state()).isEqualTo(BufferState.HOST_ONLY);
            try (BufferAccess access = buffer.deviceAccess(AccessMode.READ_WRITE)) {
                assertThat(buffer.state()).as("a writing access makes the device copy the newer one").isEqualTo(BufferState.DEVICE_DIRTY);
                CudaDeviceHandle cuda = access.handle(CudaDeviceHandle.class);
                scaleAddIndex(cuda, cuda.stream(), 2);
            }
            assertThat(buffer.state()).isEqualTo(BufferState.DEVICE_DIRTY);
            float[] back = new float[n];
            buffer.copyTo(back);
            assertThat(firstMismatch(back, i -> 2 * x[i] + i)).as("first wrong element read by copyTo").isEqualTo(-1);
            MemorySegment read = buffer.readOnlyHostView();
            assertThat(read.getAtIndex(ValueLayout.JAVA_FLOAT, n - 1)).as("the host copy, brought up to date").isEqualTo(2 * x[n - 1] + (n - 1));
            assertThat(buffer.state()).isEqualTo(BufferState.SYNCHRONIZED);
        }
    }

    /**
     * The kernel runs on a stream of the test's own, behind a spin of about 0.1 s (2e8 cycles at up to 2 GHz);
     * {@code copyTo} reads on the backend's stream, which is not ordered after it. Only {@code recordWork} makes the
     * read wait: without it the read would see the data from before the kernel.
     */
    @Test
    void workOnAStreamOfOnesOwnIsAwaitedThroughRecordWork() {
        int n = 1 << 20;
        float[] x = data(n);
        CUstream own = new CUstream();
        CudaResults.check(cuStreamCreate(own, CUstream_flags.CU_STREAM_NON_BLOCKING), "cuStreamCreate");
        try (UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, n, MemoryLocation.DEVICE)) {
            buffer.copyFrom(x);
            try (BufferAccess access = buffer.deviceAccess(AccessMode.READ_WRITE)) {
                CudaDeviceHandle cuda = access.handle(CudaDeviceHandle.class);
                spin(own, 200_000_000L);
                scaleAddIndex(cuda, own, 2);
                cuda.recordWork(own);
            }
            float[] back = new float[n];
            buffer.copyTo(back);
            assertThat(firstMismatch(back, i -> 2 * x[i] + i)).as("first element read before the kernel on the own stream ended").isEqualTo(-1);
        } finally {
            CudaResults.check(cuStreamDestroy(own), "cuStreamDestroy");
        }
    }

    @Test
    void hostMemoryIsRefusedAndTheBufferStaysUsable() {
        try (UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.HOST)) {
            assertThatThrownBy(() -> buffer.deviceAccess(AccessMode.READ_WRITE))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("HOST memory")
                    .hasMessageContaining("DEVICE, PINNED or UNIFIED")
                    .hasMessageContaining("host access");
            buffer.copyFrom(new float[] {5});
            float[] back = new float[1];
            buffer.copyTo(back);
            assertThat(back[0]).isEqualTo(5);
        }
    }

    @Test
    void theHandleFailsOnceItsAccessHasEnded() {
        try (UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 1024, MemoryLocation.DEVICE)) {
            CudaDeviceHandle cuda;
            try (BufferAccess access = buffer.deviceAccess(AccessMode.READ)) {
                cuda = access.handle(CudaDeviceHandle.class);
            }
            assertThatThrownBy(cuda::pointer).isInstanceOf(IllegalStateException.class).hasMessageContaining("ended");
            assertThatThrownBy(cuda::stream).isInstanceOf(IllegalStateException.class);
        }
    }

    /**
     * A kernel queued behind a spin of about a second on this thread's stream, then an access and a kernel on another
     * thread's: that access opens at once (its stream waits on the device, not the host) and its kernel runs after the
     * first, as the result shows: 3 (2x + i) + i, not 2 (3x + i) + i.
     */
    @Test
    void anotherThreadsAccessIsOrderedOnTheDeviceAfterTheFirstKernel() throws Exception {
        int n = 100_003;
        float[] x = data(n);
        try (UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, n, MemoryLocation.DEVICE)) {
            buffer.copyFrom(x);
            CUevent afterSpin = new CUevent();
            CudaResults.check(cuEventCreate(afterSpin, CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate");
            try {
                try (BufferAccess access = buffer.deviceAccess(AccessMode.READ_WRITE)) {
                    CudaDeviceHandle cuda = access.handle(CudaDeviceHandle.class);
                    spin(cuda.stream(), 2_000_000_000L);
                    CudaResults.check(cuEventRecord(afterSpin, cuda.stream()), "cuEventRecord");
                    scaleAddIndex(cuda, cuda.stream(), 2);
                }
                AtomicReference<Integer> spinWhenOpened = new AtomicReference<>();
                Thread other = Thread.ofPlatform().start(() -> {
                    try (BufferAccess access = buffer.deviceAccess(AccessMode.READ_WRITE)) {
                        spinWhenOpened.set(cuEventQuery(afterSpin));
                        CudaDeviceHandle cuda = access.handle(CudaDeviceHandle.class);
                        scaleAddIndex(cuda, cuda.stream(), 3);
                    }
                });
                other.join(30_000);
                assertThat(spinWhenOpened.get()).as("the spin still ran when the other thread's access opened")
                        .isEqualTo(CUresult.CUDA_ERROR_NOT_READY);
                float[] back = new float[n];
                buffer.copyTo(back);
                assertThat(firstMismatch(back, i -> 3 * (2 * x[i] + i) + i)).isEqualTo(-1);
            } finally {
                cuEventDestroy(afterSpin);
            }
        }
    }

    /** A spin of about a second (2e9 cycles at the H100's 1.98 GHz boost clock) on this thread's stream. */
    @Test
    void awaitIdleIsBoundedWhileAKernelRuns() {
        spin(backend.enter(), 2_000_000_000L);
        long start = System.nanoTime();
        assertThat(backend.awaitIdle(Duration.ofMillis(50))).as("the spin still runs").isFalse();
        assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(Duration.ofMillis(500));
        assertThat(backend.awaitIdle(Duration.ofSeconds(30))).isTrue();
    }
}
