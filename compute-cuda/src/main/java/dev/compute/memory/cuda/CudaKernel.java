package dev.compute.memory.cuda;

import static dev.compute.memory.cuda.DriverCalls.cuFuncGetAttribute;
import static dev.compute.memory.cuda.DriverCalls.cuLaunchKernel;
import static dev.compute.memory.cuda.DriverCalls.cuModuleGetFunction;
import static dev.compute.memory.cuda.DriverCalls.cuModuleLoadDataJIT;
import static dev.compute.memory.cuda.DriverCalls.cuModuleUnload;

import dev.compute.memory.KernelArg;
import dev.compute.memory.KernelCompileException;
import dev.compute.memory.KernelSource;
import dev.compute.memory.LaunchShape;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.spi.KernelArgument;
import dev.compute.memory.spi.NativeKernel;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import jcuda.Pointer;
import jcuda.driver.CUfunction;
import jcuda.driver.CUfunction_attribute;
import jcuda.driver.CUjit_option;
import jcuda.driver.CUmodule;
import jcuda.driver.CUresult;
import jcuda.driver.CUstream;
import jcuda.driver.JITOptions;
import org.jspecify.annotations.Nullable;

/**
 * One's own kernel as PTX ({@link KernelSource.Language#PTX}): loaded once into the device's primary context with
 * {@code cuModuleLoadDataEx} (the driver compiles the PTX for the GPU; its error log is kept for the message), and
 * launched with {@code cuLaunchKernel} on the launching thread's stream, the stream the launch's device accesses
 * order their work on. {@code cuLaunchKernel} takes its arguments by value, so any number of threads launch one
 * function at once.
 *
 * <p>The driver checks no argument: a wrong count or size is undefined behaviour on the GPU. So each launch is
 * checked against the {@code .entry}'s parameters as the PTX declares them ({@link PtxEntries}): a buffer or a Long
 * for a 64-bit parameter, an Integer for a 32-bit one, a Float for {@code .f32}, a Double for {@code .f64}.
 * A buffer is passed as its device address (the access's pointer: any offset, so a slice is its own first byte).
 */
final class CudaKernel implements NativeKernel {

    /** The JIT's error log: enough for the messages of a broken kernel. */
    private static final int LOG_BYTES = 16 << 10;
    private static final long MAX_GRID_X = Integer.MAX_VALUE;
    private static final long MAX_GRID_YZ = 65_535;
    /** CUDA's block, in each dimension, on every device since compute capability 2.0 (the threads in all: the kernel's). */
    private static final long[] MAX_BLOCK = {1024, 1024, 64};

    /** The backend's streams, which a launch goes on while the backend is open. */
    private final CudaStreams streams;
    private final String name;
    private final CUmodule module;
    private final CUfunction function;
    private final List<PtxEntries.Kind> parameters;
    private final int maxThreadsPerBlock;
    /** The block the PTX requires ({@code .reqntid}); null where it requires none. The driver refuses any other. */
    private final long @Nullable [] requiredBlock;
    private boolean unloaded;

    private CudaKernel(CudaStreams streams, String name, CUmodule module, CUfunction function, List<PtxEntries.Kind> parameters,
                       int maxThreadsPerBlock, long @Nullable [] requiredBlock) {
        this.streams = streams;
        this.name = name;
        this.module = module;
        this.function = function;
        this.parameters = parameters;
        this.maxThreadsPerBlock = maxThreadsPerBlock;
        this.requiredBlock = requiredBlock;
    }

    /** Loads {@code source} into the context current on this thread. */
    static CudaKernel load(CudaStreams streams, KernelSource source, int deviceOrdinal) {
        Map<String, List<PtxEntries.Kind>> entries = PtxEntries.read(source.text());
        List<PtxEntries.Kind> parameters = entries.get(source.name());
        if (parameters == null) {
            throw new KernelCompileException(source + " is not in the PTX given: its .entry functions are " + entries.keySet()
                    + " (a C++ function's PTX name is mangled unless it is declared extern \"C\")", "");
        }
        byte[] text = source.text().getBytes(StandardCharsets.UTF_8);
        byte[] ptx = Arrays.copyOf(text, text.length + 1); // NUL-terminated: cuModuleLoadDataEx takes PTX as a C string
        JITOptions options = new JITOptions();
        options.putBytes(CUjit_option.CU_JIT_ERROR_LOG_BUFFER, new byte[LOG_BYTES]);
        options.putInt(CUjit_option.CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, LOG_BYTES);
        CUmodule module = new CUmodule();
        int loaded = cuModuleLoadDataJIT(module, Pointer.to(ptx), options);
        if (loaded != CudaResults.SUCCESS) {
            if (CudaResults.contextLost(loaded)) {
                throw CudaResults.failure(loaded, "cuModuleLoadDataEx(" + source + ")"); // not the PTX's fault
            }
            throw new KernelCompileException("loading the PTX of " + source + " on CUDA device " + deviceOrdinal + " failed: "
                    + CudaResults.name(loaded) + (loaded == CUresult.CUDA_ERROR_UNSUPPORTED_PTX_VERSION
                    ? " (the PTX is newer than this driver: make it with an older nvcc, or update the driver)" : ""), errorLog(options));
        }
        try {
            CUfunction function = new CUfunction();
            CudaResults.check(cuModuleGetFunction(function, module, source.name()), "cuModuleGetFunction(" + source.name() + ")");
            int[] maxThreads = new int[1];
            CudaResults.check(cuFuncGetAttribute(maxThreads, CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, function),
                    "cuFuncGetAttribute(MAX_THREADS_PER_BLOCK of " + source.name() + ")");
            return new CudaKernel(streams, source.name(), module, function, parameters, Math.max(1, maxThreads[0]),
                    PtxEntries.requiredBlock(source.text(), source.name()));
        } catch (RuntimeException e) {
            cuModuleUnload(module);
            throw e;
        }
    }

    private static String errorLog(JITOptions options) {
        String log = options.getString(CUjit_option.CU_JIT_ERROR_LOG_BUFFER);
        return log == null ? "" : log.trim();
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public CompletableFuture<Void> launch(LaunchShape shape, List<KernelArgument> arguments) {
        long[] threads = threads(shape);
        long[] grid = grid(shape, threads); // both checked before the accesses opened
        Pointer[] values = new Pointer[arguments.size()];
        CUstream stream = null;
        for (int i = 0; i < values.length; i++) {
            values[i] = switch (arguments.get(i)) {
                case KernelArgument.Buffer buffer -> {
                    CudaDeviceHandle handle = (CudaDeviceHandle) buffer.handle();
                    stream = handle.stream();
                    yield Pointer.to(new long[] {handle.address()});
                }
                case KernelArgument.Scalar(Integer value) -> Pointer.to(new int[] {value});
                case KernelArgument.Scalar(Long value) -> Pointer.to(new long[] {value});
                case KernelArgument.Scalar(Float value) -> Pointer.to(new float[] {value});
                case KernelArgument.Scalar(Double value) -> Pointer.to(new double[] {value});
                case KernelArgument.Scalar scalar -> throw new IllegalArgumentException("kernel '" + name + "', argument " + i
                        + ": no scalar type " + scalar.value().getClass());
            };
        }
        return streams.launch(stream, queued -> {
            synchronized (this) {
                if (unloaded) {
                    throw new IllegalStateException("kernel '" + name + "' was unloaded: its CUDA backend is closed");
                }
            }
            streams.makeCurrent(); // after the wait for this kernel's monitor
            CudaResults.check(cuLaunchKernel(function, (int) grid[0], (int) grid[1], (int) grid[2], (int) threads[0], (int) threads[1],
                    (int) threads[2], 0, queued, Pointer.to(values), null), "cuLaunchKernel of kernel '" + name + "' over " + shape
                    + " (blocks of " + Arrays.toString(threads) + ", at most " + maxThreadsPerBlock + " threads for this kernel)");
        });
    }

    /** Checked before the manager opens any access, so a refused launch syncs, waits for and marks nothing. */
    @Override
    public void check(LaunchShape shape, List<Object> arguments) {
        long[] threads = threads(shape);
        long[] required = requiredBlock;
        if (required != null && !Arrays.equals(threads, required)) { // cuLaunchKernel would refuse it, after the accesses
            throw new IllegalArgumentException("kernel '" + name + "' over " + shape + ": a block of " + Arrays.toString(threads)
                    + " threads where the PTX requires " + Arrays.toString(required) + " (.reqntid); give that work-group, or none");
        }
        if (threads[0] > maxThreadsPerBlock || threads[1] > maxThreadsPerBlock || threads[2] > maxThreadsPerBlock
                || threads[0] * threads[1] * threads[2] > maxThreadsPerBlock) {
            // checked here, not left to the driver: (int) of a block size from 2^32 on is another, valid block
            throw new IllegalArgumentException("kernel '" + name + "' over " + shape + ": a block of " + Arrays.toString(threads)
                    + " threads is more than the " + maxThreadsPerBlock + " this kernel can run per block");
        }
        if (threads[0] > MAX_BLOCK[0] || threads[1] > MAX_BLOCK[1] || threads[2] > MAX_BLOCK[2]) {
            // cuLaunchKernel would refuse it, after the accesses synced and marked their buffers
            throw new IllegalArgumentException("kernel '" + name + "' over " + shape + ": a block of " + Arrays.toString(threads)
                    + " threads is beyond CUDA's block of " + Arrays.toString(MAX_BLOCK) + " threads in its three dimensions");
        }
        long[] grid = grid(shape, threads);
        if (grid[0] > MAX_GRID_X || grid[1] > MAX_GRID_YZ || grid[2] > MAX_GRID_YZ) {
            throw new IllegalArgumentException("kernel '" + name + "' over " + shape + " needs a grid of " + Arrays.toString(grid)
                    + " blocks of " + Arrays.toString(threads) + ", beyond CUDA's grid (2^31-1 x 65535 x 65535): launch larger blocks"
                    + " (withWorkGroup) or loop inside the kernel");
        }
        if (arguments.size() != parameters.size()) {
            throw new IllegalArgumentException("kernel '" + name + "' takes " + parameters.size() + " argument(s) (its PTX .entry's "
                    + "parameters); the launch passed " + arguments.size());
        }
        for (int i = 0; i < parameters.size(); i++) {
            PtxEntries.Kind parameter = parameters.get(i);
            Object argument = arguments.get(i);
            if (argument instanceof KernelArg buffer && buffer.buffer().location() == MemoryLocation.HOST) {
                throw new IllegalArgumentException("kernel '" + name + "', argument " + i + " (" + buffer.buffer() + "): "
                        + CudaBackend.HOST_REFUSED);
            }
            PtxEntries.Kind needed = switch (argument) {
                case KernelArg ignored -> PtxEntries.Kind.BITS64;
                case Integer ignored -> PtxEntries.Kind.BITS32;
                case Long ignored -> PtxEntries.Kind.BITS64;
                case Float ignored -> PtxEntries.Kind.FLOAT32;
                case Double ignored -> PtxEntries.Kind.FLOAT64;
                default -> PtxEntries.Kind.OTHER;
            };
            if (needed != parameter) {
                throw new IllegalArgumentException("kernel '" + name + "', argument " + i + " (" + describe(argument) + "): the PTX"
                        + " parameter " + i + " is " + parameter.words + "; pass " + switch (parameter) {
                            case BITS64 -> "a UnifiedBuffer, a KernelArg or a Long";
                            case BITS32 -> "an Integer";
                            case FLOAT32 -> "a Float";
                            case FLOAT64 -> "a Double";
                            case OTHER -> "nothing: change the parameter to a pointer, int, long long, float or double";
                        });
            }
        }
    }

    private static String describe(Object argument) {
        return argument instanceof KernelArg buffer ? "a buffer, " + buffer.buffer()
                : KernelArgument.typeOf(argument) + " " + argument;
    }

    /**
     * The block's threads in each of the three dimensions: the shape's work-group, 1 beyond its dimensions, or where the
     * shape leaves it to the backend, the block the PTX requires or the default.
     */
    private long[] threads(LaunchShape shape) {
        long[] required = requiredBlock;
        if (required != null && !shape.hasWorkGroup()) {
            return required.clone();
        }
        long[] block = shape.workGroupOrDefault(maxThreadsPerBlock);
        long[] threads = new long[] {1, 1, 1};
        System.arraycopy(block, 0, threads, 0, block.length);
        return threads;
    }

    /** The blocks in each of the three dimensions that cover the shape. */
    private static long[] grid(LaunchShape shape, long[] threads) {
        long[] grid = new long[] {1, 1, 1};
        for (int d = 0; d < shape.dimensions(); d++) {
            grid[d] = Math.ceilDiv(shape.size(d), threads[d]);
        }
        return grid;
    }

    /** Unloads the module; the context is current and no launch of it is in flight (the backend's close waited). */
    synchronized void unload() {
        if (!unloaded) {
            unloaded = true;
            cuModuleUnload(module);
        }
    }

    @Override
    public String toString() {
        return "CudaKernel['" + name + "', " + parameters.size() + " parameters]";
    }
}
