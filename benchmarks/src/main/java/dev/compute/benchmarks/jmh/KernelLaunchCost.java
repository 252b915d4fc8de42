package dev.compute.benchmarks.jmh;

import dev.compute.memory.AccessMode;
import dev.compute.memory.BufferAccess;
import dev.compute.memory.ComputeKernel;
import dev.compute.memory.DataType;
import dev.compute.memory.KernelSource;
import dev.compute.memory.LaunchShape;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.opencl.OpenClDeviceHandle;
import dev.compute.memory.opencl.OpenClNativeDevice;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.jocl.CL;
import org.jocl.Pointer;
import org.jocl.Sizeof;
import org.jocl.cl_command_queue;
import org.jocl.cl_device_id;
import org.jocl.cl_event;
import org.jocl.cl_kernel;
import org.jocl.cl_mem;
import org.jocl.cl_program;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * What a launch through the kernel API costs against the same launch in raw JOCL, on the OpenCL device at hand (PoCL
 * here: start the JVM with {@code LD_PRELOAD=$JAVA_HOME/lib/libjsig.so}). One small kernel, {@code x[i] *= a} over
 * 4096 floats of DEVICE memory, on the backend's own queue in both cases:
 * <ul>
 * <li>{@code rawLaunchAndWait}: a {@code cl_kernel} kept by the thread, three {@code clSetKernelArg},
 *     {@code clEnqueueNDRangeKernel}, {@code clWaitForEvents} on its event (the floor);</li>
 * <li>{@code rawNewKernelPerLaunchAndWait}: the same with {@code clCreateKernel} and {@code clReleaseKernel} around
 *     each launch, what a thread-safe launch costs without the API's pool of kernel objects;</li>
 * <li>{@code accessAndRawLaunchAndWait}: a device access by hand, the handle's {@code cl_mem}, the launch, the
 *     access's end, then waiting for the event (the page of JOCL the API replaces);</li>
 * <li>{@code apiLaunchAndJoin}: {@code kernel.launch(shape, x, n, a).join()};</li>
 * <li>{@code raw10LaunchesThenWait} and {@code api10LaunchesThenJoin}: ten launches queued back to back, then waiting
 *     for the last: what a launch costs when the caller does not wait for each (time per launch).</li>
 * </ul>
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED", "-Xms1g", "-Xmx1g"})
public class KernelLaunchCost {

    static final String SCALE = """
            __kernel void scale(__global float *x, long n, float a) {
                long i = get_global_id(0);
                if (i < n) x[i] *= a;
            }""";
    static final int N = 4096;

    private UnifiedMemoryManager manager;
    private ComputeKernel kernel;
    private UnifiedBuffer buffer;
    private cl_program program;
    private cl_kernel rawKernel;
    private cl_mem rawBuffer;
    private cl_command_queue queue;

    @Setup(Level.Trial)
    public void open() {
        manager = UnifiedMemoryManager.builder().backend("opencl").timelineInterval(Duration.ZERO).build();
        kernel = manager.kernels().compile(KernelSource.openCl(SCALE, "scale"));
        buffer = manager.allocate(DataType.FLOAT32, N, MemoryLocation.DEVICE);
        buffer.copyFrom(new float[N]);
        OpenClNativeDevice cl = manager.nativeDevice(OpenClNativeDevice.class);
        queue = cl.queue();
        int[] error = new int[1];
        program = CL.clCreateProgramWithSource(cl.context(), 1, new String[] {SCALE}, null, error);
        check(error[0]);
        check(CL.clBuildProgram(program, 1, new cl_device_id[] {cl.device()}, null, null, null));
        rawKernel = CL.clCreateKernel(program, "scale", error);
        check(error[0]);
        rawBuffer = CL.clCreateBuffer(cl.context(), CL.CL_MEM_READ_WRITE, (long) N * Float.BYTES, null, error);
        check(error[0]);
    }

    @TearDown(Level.Trial)
    public void close() {
        CL.clFinish(queue);
        CL.clReleaseMemObject(rawBuffer);
        CL.clReleaseKernel(rawKernel);
        CL.clReleaseProgram(program);
        buffer.close();
        manager.close();
    }

    @Benchmark
    public void rawLaunchAndWait() {
        cl_event done = rawLaunch(rawKernel, rawBuffer);
        waitFor(done);
    }

    @Benchmark
    public void rawNewKernelPerLaunchAndWait() {
        int[] error = new int[1];
        cl_kernel own = CL.clCreateKernel(program, "scale", error);
        check(error[0]);
        cl_event done = rawLaunch(own, rawBuffer);
        CL.clReleaseKernel(own);
        waitFor(done);
    }

    @Benchmark
    public void accessAndRawLaunchAndWait() {
        cl_event done;
        try (BufferAccess access = buffer.deviceAccess(AccessMode.READ_WRITE)) {
            OpenClDeviceHandle handle = access.handle(OpenClDeviceHandle.class);
            synchronized (this) { // a shared cl_kernel: its arguments are set under a lock
                done = rawLaunch(rawKernel, handle.memory());
            }
        }
        waitFor(done);
    }

    @Benchmark
    public void apiLaunchAndJoin() {
        kernel.launch(LaunchShape.of(N), buffer, (long) N, 1.0f).join();
    }

    @Benchmark
    @OperationsPerInvocation(10)
    public void raw10LaunchesThenWait() {
        cl_event last = null;
        for (int i = 0; i < 10; i++) {
            if (last != null) {
                CL.clReleaseEvent(last);
            }
            last = rawLaunch(rawKernel, rawBuffer);
        }
        waitFor(last);
    }

    @Benchmark
    @OperationsPerInvocation(10)
    public void api10LaunchesThenJoin() {
        CompletableFuture<Void> last = null;
        for (int i = 0; i < 10; i++) {
            last = kernel.launch(LaunchShape.of(N), buffer, (long) N, 1.0f);
        }
        last.join();
    }

    private cl_event rawLaunch(cl_kernel k, cl_mem memory) {
        return rawLaunch(queue, k, memory);
    }

    /** {@code x[i] *= 1} over {@link #N} floats of {@code memory}, launched on {@code queue} in raw JOCL and flushed: its event. */
    static cl_event rawLaunch(cl_command_queue queue, cl_kernel k, cl_mem memory) {
        cl_event done = enqueueLaunch(queue, k, memory);
        check(CL.clFlush(queue));
        return done;
    }

    /** The launch without the flush: inside a device access, whose end flushes the queue. */
    static cl_event enqueueLaunch(cl_command_queue queue, cl_kernel k, cl_mem memory) {
        check(CL.clSetKernelArg(k, 0, Sizeof.cl_mem, Pointer.to(memory)));
        check(CL.clSetKernelArg(k, 1, Sizeof.cl_long, Pointer.to(new long[] {N})));
        check(CL.clSetKernelArg(k, 2, Sizeof.cl_float, Pointer.to(new float[] {1.0f})));
        cl_event done = new cl_event();
        check(CL.clEnqueueNDRangeKernel(queue, k, 1, null, new long[] {N}, new long[] {256}, 0, null, done));
        return done;
    }

    private static void waitFor(cl_event event) {
        check(CL.clWaitForEvents(1, new cl_event[] {event}));
        CL.clReleaseEvent(event);
    }

    static void check(int code) {
        if (code != CL.CL_SUCCESS) {
            throw new IllegalStateException(CL.stringFor_errorCode(code));
        }
    }
}
