package dev.compute.memory.opencl;

import static org.jocl.CL.CL_KERNEL_WORK_GROUP_SIZE;
import static org.jocl.CL.CL_MEM_READ_WRITE;
import static org.jocl.CL.CL_PROGRAM_BUILD_LOG;
import static org.jocl.CL.CL_SUCCESS;

import dev.compute.memory.DataType;
import dev.compute.memory.spi.KernelOps;
import dev.compute.memory.spi.NativeAllocation;
import dev.compute.memory.spi.Region;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.locks.Lock;
import java.util.function.Consumer;
import java.util.stream.Stream;
import org.jocl.CL;
import org.jocl.Pointer;
import org.jocl.Sizeof;
import org.jocl.cl_device_id;
import org.jocl.cl_event;
import org.jocl.cl_kernel;
import org.jocl.cl_mem;
import org.jocl.cl_program;
import org.jspecify.annotations.Nullable;

/**
 * Fill, scale, axpy and sum as the OpenCL C kernels of {@code ops.cl}, built once per context on first use
 * (a backend used only for memory never pays the compile). Every kernel takes an element offset, so a block
 * at any element-aligned offset of a pool segment is used in place.
 *
 * <p>Where a region lies: DEVICE buffers are passed as they are, UNIFIED (fine-grained SVM) as SVM pointers.
 * HOST and PINNED memory is wrapped for the launch in a {@code CL_MEM_USE_HOST_PTR} buffer over exactly the
 * region; after a kernel writes one, a map and unmap make the results visible in host memory on every
 * implementation (on PoCL and integrated GPUs that costs nothing; a discrete GPU copies).
 *
 * <p>FLOAT64 needs {@code cl_khr_fp64}; on a device without it the double kernels are not built and FLOAT64
 * ops throw {@link UnsupportedOperationException}. {@code sum} adds work-group partial sums (in double where
 * the device has it) and the host adds the partials in double.
 */
final class OpenClKernelOps implements KernelOps {

    static final String SOURCE = "ops.cl";
    private static final long MAX_SUM_LOCAL_SIZE = 256;
    private static final long MAX_SUM_GROUPS = 1024;
    /** Element-wise kernels loop over the data with the grid's stride: more work-items than this buy nothing. */
    private static final long MAX_ELEMENTWISE_GLOBAL_SIZE = 1L << 20;
    private static final cl_event[] NO_EVENTS = {};

    private final OpenClBackend backend;
    /** Built once, released by {@link #release} only after the calls under way (every op is one) have ended. */
    private volatile @Nullable Kernels kernels;

    /**
     * The program and its kernels by operation, one map per element type: an op looks its kernel up by the operation's
     * name as it is, with no name made per launch.
     */
    private record Kernels(cl_program program, Map<String, OpKernel> f32, Map<String, OpKernel> f64) {
        Stream<cl_kernel> all() {
            return Stream.concat(f32.values().stream(), f64.values().stream()).map(OpKernel::kernel);
        }
    }

    /**
     * A kernel of the op set and what setting its arguments reuses, under its monitor (a kernel's arguments are shared
     * state, and OpenCL copies an argument's value when it is set): the scalars' arrays and pointers, the pointer to the
     * buffer it was last given, and the global size, so that a fill or a scale makes none of them anew (axpy and sum set
     * theirs through the same setters, with a global size and an event of their own).
     */
    private static final class OpKernel {
        final cl_kernel kernel;
        private final long[] longValue = new long[1];
        private final Pointer longArgument = Pointer.to(longValue);
        private final float[] floatValue = new float[1];
        private final Pointer floatArgument = Pointer.to(floatValue);
        private final double[] doubleValue = new double[1];
        private final Pointer doubleArgument = Pointer.to(doubleValue);
        private final long[] globalSize = new long[1];
        private @Nullable cl_mem lastMemory;
        private @Nullable Pointer lastMemoryArgument;

        OpKernel(cl_kernel kernel) {
            this.kernel = kernel;
        }

        cl_kernel kernel() {
            return kernel;
        }

        /** Under this monitor. */
        void setMemory(int index, cl_mem memory) {
            if (memory != lastMemory) {
                lastMemoryArgument = Pointer.to(memory);
                lastMemory = memory;
            }
            OpenClCalls.check(JoclCalls.clSetKernelArg(kernel, index, Sizeof.cl_mem, lastMemoryArgument), "clSetKernelArg");
        }

        /** Under this monitor. */
        void setLong(int index, long value) {
            longValue[0] = value;
            OpenClCalls.check(JoclCalls.clSetKernelArg(kernel, index, Sizeof.cl_ulong, longArgument), "clSetKernelArg");
        }

        /** Under this monitor. */
        void setScalar(int index, DataType type, double value) {
            int code;
            if (type == DataType.FLOAT64) {
                doubleValue[0] = value;
                code = JoclCalls.clSetKernelArg(kernel, index, Sizeof.cl_double, doubleArgument);
            } else {
                floatValue[0] = (float) value;
                code = JoclCalls.clSetKernelArg(kernel, index, Sizeof.cl_float, floatArgument);
            }
            OpenClCalls.check(code, "clSetKernelArg");
        }

        /** Under this monitor: a global size the launch reads at once, then no longer needs. */
        long[] globalSize(long size) {
            globalSize[0] = size;
            return globalSize;
        }
    }

    OpenClKernelOps(OpenClBackend backend) {
        this.backend = backend;
    }

    // Each op is a call the close waits for (OpenClQueue.asCall): it builds the program on first use and uses its
    // kernels, which the close releases.

    @Override
    public CompletableFuture<Void> fill(Region target, double value) {
        return inPlaceCall("fill", target, value);
    }

    @Override
    public CompletableFuture<Void> scale(Region x, double alpha) {
        return inPlaceCall("scale", x, alpha);
    }

    /** {@link #inPlace} as a call (asCall's lock, with no lambda made on every op). */
    private CompletableFuture<Void> inPlaceCall(String name, Region region, double scalar) {
        Lock call = backend.queue().enterCall();
        try {
            return inPlace(name, region, scalar);
        } finally {
            call.unlock();
        }
    }

    /**
     * Kernel {@code name} on each element of {@code region} with one scalar: (buffer, element offset, count, scalar).
     * Launched with no event of its own where the region is an OpenCL buffer or SVM of the backend's (DEVICE, UNIFIED):
     * its queue position says when it is done. HOST and PINNED memory, wrapped for the launch, is published after it.
     */
    private CompletableFuture<Void> inPlace(String name, Region region, double scalar) {
        OpKernel kernel = kernel(name, region.type());
        long n = region.count();
        if (n == 0) {
            return CompletableFuture.completedFuture(null);
        }
        try (Argument bound = bind(region)) {
            cl_event done = bound.wrapsHostMemory() ? new cl_event() : null;
            synchronized (kernel) {
                bound.set(kernel, 0);
                kernel.setLong(1, bound.elementOffset());
                kernel.setLong(2, n);
                kernel.setScalar(3, region.type(), scalar);
                OpenClCalls.check(JoclCalls.clEnqueueNDRangeKernel(backend.commandQueue(), kernel.kernel, 1, null,
                        kernel.globalSize(elementwiseGlobalSize(n)), null, 0, null, done), "clEnqueueNDRangeKernel");
            }
            return done == null ? backend.queue().position() : complete(done, bound, name);
        }
    }

    @Override
    public CompletableFuture<Void> axpy(double alpha, Region x, Region y) {
        return backend.queue().asCall(() -> axpyCall(alpha, x, y));
    }

    private CompletableFuture<Void> axpyCall(double alpha, Region x, Region y) {
        if (x.type() != y.type() || x.count() != y.count()) {
            throw new IllegalArgumentException("axpy needs x and y of one type and count: x is " + x.count() + " x " + x.type()
                    + ", y is " + y.count() + " x " + y.type());
        }
        OpKernel kernel = kernel("axpy", y.type());
        long n = y.count();
        if (n == 0) {
            return CompletableFuture.completedFuture(null);
        }
        try (Argument from = bind(x); Argument to = bind(y)) {
            cl_event done = launch(kernel, elementwiseGlobalSize(n), 0, k -> {
                k.setScalar(0, y.type(), alpha);
                from.set(k, 1);
                k.setLong(2, from.elementOffset());
                to.set(k, 3);
                k.setLong(4, to.elementOffset());
                k.setLong(5, n);
            });
            return complete(done, to, "axpy");
        }
    }

    @Override
    public CompletableFuture<Double> sum(Region x) {
        return backend.queue().asCall(() -> sumCall(x));
    }

    private CompletableFuture<Double> sumCall(Region x) {
        OpKernel kernel = kernel("sum", x.type());
        long n = x.count();
        if (n == 0) {
            return CompletableFuture.completedFuture(0.0);
        }
        long local = sumLocalSize(kernel.kernel);
        long groups = Math.clamp(Math.ceilDiv(n, local), 1, Math.min(MAX_SUM_GROUPS, Math.max(1, 4L * backend.computeUnits())));
        int accumulatorBytes = backend.hasDoublePrecision() ? Sizeof.cl_double : Sizeof.cl_float;
        long partialBytes = groups * accumulatorBytes;
        int[] error = new int[1];
        cl_mem partial = JoclCalls.clCreateBuffer(backend.context(), CL_MEM_READ_WRITE, partialBytes, null, error);
        OpenClCalls.check(error[0], "clCreateBuffer of " + partialBytes + " bytes for sum's partial sums");
        try (Argument bound = bind(x)) {
            cl_event reduced = launch(kernel, groups * local, local, k -> {
                bound.set(k, 0);
                k.setLong(1, bound.elementOffset());
                k.setLong(2, n);
                OpenClCalls.check(JoclCalls.clSetKernelArg(k.kernel, 3, Sizeof.cl_mem, Pointer.to(partial)), "clSetKernelArg");
                OpenClCalls.check(JoclCalls.clSetKernelArg(k.kernel, 4, local * accumulatorBytes, null), "clSetKernelArg");
            });
            JoclCalls.clReleaseEvent(reduced);
            ByteBuffer partials = ByteBuffer.allocateDirect((int) partialBytes).order(ByteOrder.nativeOrder());
            cl_event read = new cl_event();
            OpenClCalls.check(JoclCalls.clEnqueueReadBuffer(backend.commandQueue(), partial, false, 0, partialBytes, Pointer.to(partials), 0, null, read),
                    "clEnqueueReadBuffer of sum's partial sums");
            return backend.queue().track(read, "sum", () -> {
                double total = 0;
                for (int g = 0; g < groups; g++) {
                    total += accumulatorBytes == Sizeof.cl_double ? partials.getDouble(g * Sizeof.cl_double) : partials.getFloat(g * Sizeof.cl_float);
                }
                return total;
            });
        } finally {
            // OpenCL deletes it once the commands using it have finished
            JoclCalls.clReleaseMemObject(partial);
        }
    }

    // ---- launching ----------------------------------------------------------------------------------------------

    /** Sets the arguments and enqueues under the kernel's lock: a kernel's arguments are shared state. */
    private cl_event launch(OpKernel kernel, long globalSize, long localSize, Consumer<OpKernel> arguments) {
        cl_event done = new cl_event();
        synchronized (kernel) {
            arguments.accept(kernel);
            OpenClCalls.check(JoclCalls.clEnqueueNDRangeKernel(backend.commandQueue(), kernel.kernel, 1, null, new long[] {globalSize},
                    localSize == 0 ? null : new long[] {localSize}, 0, null, done), "clEnqueueNDRangeKernel");
        }
        return done;
    }

    /** The future of a kernel that wrote {@code written}: after a map and unmap where it is host memory wrapped for the launch. */
    private CompletableFuture<Void> complete(cl_event kernelDone, Argument written, String what) {
        if (!written.wrapsHostMemory()) {
            return backend.queue().position(kernelDone);
        }
        JoclCalls.clReleaseEvent(kernelDone);
        cl_event unmapped = new cl_event();
        backend.queue().enqueuePublishToHost(written.memory(), written.bytes(), NO_EVENTS, unmapped);
        return backend.queue().track(unmapped, what);
    }

    private static long elementwiseGlobalSize(long n) {
        return Math.min(Math.ceilDiv(n, 64) * 64, MAX_ELEMENTWISE_GLOBAL_SIZE);
    }

    /** The reduction's tree needs a power of two: the largest one the kernel allows, at most 256. */
    private long sumLocalSize(cl_kernel kernel) {
        long[] allowed = new long[1];
        OpenClCalls.check(JoclCalls.clGetKernelWorkGroupInfo(kernel, backend.deviceId(), CL_KERNEL_WORK_GROUP_SIZE, Sizeof.size_t, Pointer.to(allowed), null),
                "clGetKernelWorkGroupInfo");
        return Long.highestOneBit(Math.max(1, Math.min(MAX_SUM_LOCAL_SIZE, allowed[0])));
    }

    // ---- regions as kernel arguments --------------------------------------------------------------------------

    /** A region as a kernel argument: a buffer or SVM pointer and the element offset into it. */
    private record Argument(@Nullable cl_mem memory, @Nullable Pointer svm, long elementOffset, long bytes, boolean wrapsHostMemory)
            implements AutoCloseable {

        /** Under the kernel's monitor. */
        void set(OpKernel kernel, int index) {
            if (svm != null) {
                OpenClCalls.check(JoclCalls.clSetKernelArgSVMPointer(kernel.kernel, index, svm), "clSetKernelArg");
            } else {
                kernel.setMemory(index, Objects.requireNonNull(memory));
            }
        }

        /** Releases the wrapping buffer; OpenCL keeps it until the commands using it have finished. */
        @Override
        public void close() {
            if (wrapsHostMemory) {
                JoclCalls.clReleaseMemObject(memory);
            }
        }
    }

    private Argument bind(Region region) {
        backend.checkOpen();
        int elementSize = region.type().byteSize();
        if (region.offset() % elementSize != 0) {
            throw new IllegalArgumentException("a " + region.type() + " region must start at a multiple of " + elementSize
                    + " bytes; it starts at " + region.offset());
        }
        NativeAllocation allocation = region.allocation();
        long elementOffset = region.offset() / elementSize;
        return switch (allocation.handle()) {
            case cl_mem memory -> new Argument(memory, null, elementOffset, region.byteSize(), false);
            case OpenClBackend.SharedVirtualMemory svm -> new Argument(null, svm.pointer(), elementOffset, region.byteSize(), false);
            case null, default -> wrapHostMemory(region);
        };
    }

    private Argument wrapHostMemory(Region region) {
        cl_mem wrapper = backend.allocator().hostMemoryBuffer(region.allocation(), region.offset(), region.byteSize(), CL_MEM_READ_WRITE);
        return new Argument(wrapper, null, 0, region.byteSize(), true);
    }

    // ---- the program --------------------------------------------------------------------------------------------

    private OpKernel kernel(String operation, DataType type) {
        if (type != DataType.FLOAT32 && type != DataType.FLOAT64) { // refused before any build, as bad input
            throw new IllegalArgumentException("the op set works on FLOAT32 and FLOAT64; this region is " + type);
        }
        if (type == DataType.FLOAT64 && !backend.hasDoublePrecision()) {
            throw new UnsupportedOperationException("FLOAT64 " + operation + " needs double precision (cl_khr_fp64), which OpenCL device "
                    + backend.device().describe() + " lacks; use FLOAT32 buffers or a device with cl_khr_fp64");
        }
        Kernels built = kernels; // set once; released only after every op's call has ended
        if (built == null) {
            built = kernels();
        }
        return type == DataType.FLOAT32 ? built.f32().get(operation) : built.f64().get(operation);
    }

    private synchronized Kernels kernels() {
        backend.checkOpen();
        if (kernels == null) {
            kernels = build();
        }
        return kernels;
    }

    private Kernels build() {
        int[] error = new int[1];
        cl_program program = JoclCalls.clCreateProgramWithSource(backend.context(), 1, new String[] {source()}, null, error);
        OpenClCalls.check(error[0], "clCreateProgramWithSource");
        cl_device_id device = backend.deviceId();
        int built = JoclCalls.clBuildProgram(program, 1, new cl_device_id[] {device}, "-D HAS_FP64=" + (backend.hasDoublePrecision() ? 1 : 0), null, null);
        if (built != CL_SUCCESS) {
            String log = buildLog(program, device);
            JoclCalls.clReleaseProgram(program);
            throw new OpenClException("building the op kernels (" + SOURCE + ") on " + backend.device().describe() + " failed: "
                    + CL.stringFor_errorCode(built) + "\n" + log);
        }
        Map<String, OpKernel> f32 = new HashMap<>();
        Map<String, OpKernel> f64 = new HashMap<>();
        for (String operation : new String[] {"fill", "scale", "axpy", "sum"}) {
            for (String suffix : backend.hasDoublePrecision() ? new String[] {"f32", "f64"} : new String[] {"f32"}) {
                String name = operation + "_" + suffix;
                cl_kernel kernel = JoclCalls.clCreateKernel(program, name, error);
                if (error[0] != CL_SUCCESS) {
                    Stream.concat(f32.values().stream(), f64.values().stream()).forEach(made -> JoclCalls.clReleaseKernel(made.kernel));
                    JoclCalls.clReleaseProgram(program);
                    OpenClCalls.check(error[0], "clCreateKernel " + name);
                }
                (suffix.equals("f32") ? f32 : f64).put(operation, new OpKernel(kernel));
            }
        }
        return new Kernels(program, Map.copyOf(f32), Map.copyOf(f64));
    }

    private static String source() {
        try (InputStream in = OpenClKernelOps.class.getResourceAsStream(SOURCE)) {
            if (in == null) {
                throw new IllegalStateException(SOURCE + " is missing from the class path beside " + OpenClKernelOps.class.getName());
            }
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException("reading " + SOURCE, e);
        }
    }

    private static String buildLog(cl_program program, cl_device_id device) {
        long[] size = new long[1];
        JoclCalls.clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, null, size);
        byte[] log = new byte[(int) size[0]];
        JoclCalls.clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, log.length, Pointer.to(log), null);
        return new String(log, StandardCharsets.UTF_8).trim();
    }

    /** Releases the kernels and the program, if they were ever built. */
    synchronized void release() {
        Kernels built = kernels;
        if (built != null) {
            built.all().forEach(JoclCalls::clReleaseKernel);
            JoclCalls.clReleaseProgram(built.program());
            kernels = null;
        }
    }
}
