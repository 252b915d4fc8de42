package dev.compute.memory.cuda;

import static dev.compute.memory.cuda.DriverCalls.cuLaunchKernel;
import static dev.compute.memory.cuda.DriverCalls.cuMemAlloc;
import static dev.compute.memory.cuda.DriverCalls.cuMemFree;
import static dev.compute.memory.cuda.DriverCalls.cuMemFreeHost;
import static dev.compute.memory.cuda.DriverCalls.cuMemHostAlloc;
import static dev.compute.memory.cuda.DriverCalls.cuMemcpyDtoHAsync;
import static java.lang.foreign.ValueLayout.JAVA_DOUBLE;

import dev.compute.memory.DataType;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.spi.HostKernelOps;
import dev.compute.memory.spi.KernelOps;
import dev.compute.memory.spi.Region;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import jcuda.Pointer;
import jcuda.driver.CUfunction;
import jcuda.driver.CUstream;
import jcuda.driver.JCudaDriver;

/**
 * The op set as the PTX kernels of {@code src/main/cuda/ops.cu}, launched on the calling thread's stream; each
 * future completes when its kernel has finished on the device. FLOAT32 kernels compute in float (the value and
 * alpha are rounded to float first), FLOAT64 in double; axpy uses one fused multiply-add. sum adds in double:
 * each block writes a partial sum and the host adds the partials in block order, so a result is reproducible.
 */
final class CudaKernelOps implements KernelOps, AutoCloseable {

    private static final KernelOps HOST = new HostKernelOps();

    static final String PTX = "/dev/compute/memory/cuda/ops.ptx";
    /** Threads per block; sum's shared array in ops.cu is sized for it. */
    static final int BLOCK = 256;
    /** Grid-stride loops cover any length; this many blocks keep every SM of an H100 busy. */
    static final int MAX_GRID = 4096;
    /** sum's partials per launch (and the scratch each sum borrows). */
    static final int SUM_BLOCKS = 1024;

    /** Device partials and the pinned memory they are read back into; one per sum in flight. */
    private record SumScratch(DevicePointer device, HostPointer host, MemorySegment view) {}

    private final CudaBackend backend;
    private final PtxModule module;
    private final CUfunction fillF32, fillF64, scaleF32, scaleF64, axpyF32, axpyF64, sumF32, sumF64;
    private final ConcurrentLinkedQueue<SumScratch> idleScratch = new ConcurrentLinkedQueue<>();
    private final ConcurrentLinkedQueue<SumScratch> allScratch = new ConcurrentLinkedQueue<>();

    /** Loads the kernels into the context current on this thread. */
    CudaKernelOps(CudaBackend backend) {
        this.backend = backend;
        this.module = new PtxModule(PTX);
        try {
            fillF32 = module.function("fill_f32");
            fillF64 = module.function("fill_f64");
            scaleF32 = module.function("scale_f32");
            scaleF64 = module.function("scale_f64");
            axpyF32 = module.function("axpy_f32");
            axpyF64 = module.function("axpy_f64");
            sumF32 = module.function("sum_f32");
            sumF64 = module.function("sum_f64");
        } catch (RuntimeException | Error e) {
            module.close(); // no backend will hold it: the functions found so far go with it
            throw e;
        }
    }

    static int grid(long count, int maxBlocks) {
        return (int) Math.max(1, Math.min(maxBlocks, Math.ceilDiv(count, BLOCK)));
    }

    /**
     * HOST memory is ordinary off-heap memory, which a kernel cannot reach: its ops run on the caller's thread. No
     * device work is under way on it then, as CUDA's copies from and to pageable memory return once the host bytes
     * have been read or written.
     */
    private static boolean onHost(Region region) {
        return region.allocation().location() == MemoryLocation.HOST;
    }

    private static long address(Region region) {
        return region.allocation().address() + region.offset();
    }

    private static Pointer scalar(DataType type, double value) {
        return type == DataType.FLOAT32 ? Pointer.to(new float[] {(float) value}) : Pointer.to(new double[] {value});
    }

    @Override
    public CompletableFuture<Void> fill(Region target, double value) {
        if (onHost(target)) {
            return HOST.fill(target, value);
        }
        Checks.region(target, "target");
        return inPlace(target.type() == DataType.FLOAT32 ? fillF32 : fillF64, target, value);
    }

    @Override
    public CompletableFuture<Void> scale(Region x, double alpha) {
        if (onHost(x)) {
            return HOST.scale(x, alpha);
        }
        Checks.region(x, "x");
        return inPlace(x.type() == DataType.FLOAT32 ? scaleF32 : scaleF64, x, alpha);
    }

    /** {@code function} on each element of a checked {@code region} with one scalar: (address, count, scalar). */
    private CompletableFuture<Void> inPlace(CUfunction function, Region region, double scalar) {
        if (region.count() == 0) {
            return CompletableFuture.completedFuture(null);
        }
        // under the lifecycle's read lock: close unloads the module and frees the scratch only once no op is under way
        return backend.streams().whileOpen(() -> {
            CUstream stream = backend.enter();
            launch(function, grid(region.count(), MAX_GRID), stream,
                    Pointer.to(Pointer.to(new long[] {address(region)}), Pointer.to(new long[] {region.count()}), scalar(region.type(), scalar)));
            return backend.completions().position(stream);
        });
    }

    @Override
    public CompletableFuture<Void> axpy(double alpha, Region x, Region y) {
        if (onHost(x) && onHost(y)) {
            return HOST.axpy(alpha, x, y);
        }
        Checks.region(x, "x");
        Checks.region(y, "y");
        Checks.sameShape(x, y);
        if (x.count() == 0) {
            return CompletableFuture.completedFuture(null);
        }
        return backend.streams().whileOpen(() -> {
            CUstream stream = backend.enter();
            launch(x.type() == DataType.FLOAT32 ? axpyF32 : axpyF64, grid(x.count(), MAX_GRID), stream,
                    Pointer.to(Pointer.to(new long[] {address(x)}), Pointer.to(new long[] {address(y)}),
                            Pointer.to(new long[] {x.count()}), scalar(x.type(), alpha)));
            return backend.completions().position(stream);
        });
    }

    @Override
    public CompletableFuture<Double> sum(Region x) {
        if (onHost(x)) {
            return HOST.sum(x);
        }
        Checks.region(x, "x");
        if (x.count() == 0) {
            return CompletableFuture.completedFuture(0.0);
        }
        return backend.streams().whileOpen(() -> sumOnDevice(x));
    }

    private CompletableFuture<Double> sumOnDevice(Region x) {
        CUstream stream = backend.enter();
        int blocks = grid(x.count(), SUM_BLOCKS);
        SumScratch scratch = scratch();
        try {
            launch(x.type() == DataType.FLOAT32 ? sumF32 : sumF64, blocks, stream,
                    Pointer.to(Pointer.to(new long[] {address(x)}), Pointer.to(new long[] {x.count()}),
                            Pointer.to(new long[] {scratch.device().address()})));
            CudaResults.check(cuMemcpyDtoHAsync(scratch.host(), scratch.device(), (long) blocks * Double.BYTES, stream),
                    "cuMemcpyDtoHAsync(sum partials)");
            return backend.completions().position(stream, () -> {
                double total = 0;
                for (int i = 0; i < blocks; i++) {
                    total += scratch.view().getAtIndex(JAVA_DOUBLE, i);
                }
                idleScratch.add(scratch);
                return total;
            });
        } catch (RuntimeException e) {
            // the scratch may still be written by a launched kernel; wait (bounded) before another sum reuses it, and
            // where the device did not get there, neither reuse nor free it
            if (backend.completions().awaitQuietly(stream)) {
                idleScratch.add(scratch);
            } else {
                allScratch.remove(scratch);
            }
            throw e;
        }
    }

    /** Launches {@code function} with {@code grid} blocks of {@link #BLOCK} threads; the context is current. */
    static void launch(CUfunction function, int grid, CUstream stream, Pointer parameters) {
        CudaResults.check(cuLaunchKernel(function, grid, 1, 1, BLOCK, 1, 1, 0, stream, parameters, null), "cuLaunchKernel");
    }

    private SumScratch scratch() {
        SumScratch scratch = idleScratch.poll();
        if (scratch != null) {
            return scratch;
        }
        long bytes = (long) SUM_BLOCKS * Double.BYTES;
        DevicePointer device = new DevicePointer();
        CudaResults.check(cuMemAlloc(device, bytes), "cuMemAlloc(" + bytes + " bytes, sum partials)");
        HostPointer host = new HostPointer();
        int result = cuMemHostAlloc(host, bytes, JCudaDriver.CU_MEMHOSTALLOC_PORTABLE);
        if (result != CudaResults.SUCCESS) {
            cuMemFree(device);
            throw CudaResults.failure(result, "cuMemHostAlloc(" + bytes + " bytes, sum partials)");
        }
        scratch = new SumScratch(device, host, MemorySegment.ofAddress(host.address()).reinterpret(bytes));
        allScratch.add(scratch);
        return scratch;
    }

    /** Frees the scratch and unloads the kernels; no op may be in flight. The context is current. */
    @Override
    public void close() {
        for (SumScratch scratch : allScratch) {
            cuMemFree(scratch.device());
            cuMemFreeHost(scratch.host());
        }
        allScratch.clear();
        idleScratch.clear();
        module.close();
    }
}
