package dev.compute.benchmarks.jmh;

import static dev.compute.benchmarks.jmh.KernelLaunchCost.check;

import dev.compute.memory.AccessMode;
import dev.compute.memory.BufferAccess;
import dev.compute.memory.DataType;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.opencl.OpenClDeviceHandle;
import dev.compute.memory.opencl.OpenClNativeDevice;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
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
import org.openjdk.jmh.annotations.AuxCounters;
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
 * Issue 27's chain: 100 small kernels and ops on one buffer, then one wait, through the manager against the same
 * launches on the raw queue, on the OpenCL device at hand (PoCL here: start the JVM with
 * {@code LD_PRELOAD=$JAVA_HOME/lib/libjsig.so}). One kernel, {@code x[i] *= a} over 4096 floats of DEVICE memory:
 * <ul>
 * <li>{@code rawChain}: 50 times the kernel, then the op set's own {@code scale_f32} (built from the backend's
 *     {@code ops.cl}, launched as the backend launches it), on the backend's queue ({@code clSetKernelArg},
 *     {@code clEnqueueNDRangeKernel}, {@code clFlush}), then {@code clWaitForEvents} on the last;</li>
 * <li>{@code accessChain}: 50 times a device access with the same launch on its handle, then
 *     {@code ops().scaleAsync}; then the last op's future joined. The launch inside the access does not flush: the
 *     access's end does, as {@code OpenClDeviceHandle}'s example says, so each chain flushes once per launch.</li>
 * </ul>
 * Time per launch. {@code pairedChains} runs one chain of each per call, in turns which first, and counts the
 * nanoseconds of each apart ({@code rawNanos}, {@code accessNanos}): on a machine whose load changes from second to
 * second their ratio is the steadier figure, the two measured within the same millisecond.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED", "-Xms1g", "-Xmx1g"})
public class AccessChainCost {

    static final int N = 4096;
    static final int STEPS = 100;

    private UnifiedMemoryManager manager;
    private UnifiedBuffer buffer;
    private cl_program program;
    private cl_kernel kernel;
    private cl_program opsProgram;
    private cl_kernel opsScale;
    private cl_mem rawBuffer;
    private cl_command_queue queue;

    @Setup(Level.Trial)
    public void open() {
        manager = UnifiedMemoryManager.builder().backend("opencl").timelineInterval(Duration.ZERO).build();
        buffer = manager.allocate(DataType.FLOAT32, N, MemoryLocation.DEVICE);
        buffer.copyFrom(new float[N]);
        OpenClNativeDevice cl = manager.nativeDevice(OpenClNativeDevice.class);
        queue = cl.queue();
        int[] error = new int[1];
        program = CL.clCreateProgramWithSource(cl.context(), 1, new String[] {KernelLaunchCost.SCALE}, null, error);
        check(error[0]);
        check(CL.clBuildProgram(program, 1, new cl_device_id[] {cl.device()}, null, null, null));
        kernel = CL.clCreateKernel(program, "scale", error);
        check(error[0]);
        rawBuffer = CL.clCreateBuffer(cl.context(), CL.CL_MEM_READ_WRITE, (long) N * Float.BYTES, null, error);
        check(error[0]);
        opsProgram = CL.clCreateProgramWithSource(cl.context(), 1, new String[] {opsSource()}, null, error);
        check(error[0]);
        check(CL.clBuildProgram(opsProgram, 1, new cl_device_id[] {cl.device()}, "-D HAS_FP64=" + (cl.hasDoublePrecision() ? 1 : 0), null, null));
        opsScale = CL.clCreateKernel(opsProgram, "scale_f32", error);
        check(error[0]);
    }

    private static String opsSource() {
        try (InputStream in = OpenClNativeDevice.class.getResourceAsStream("ops.cl")) {
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    @TearDown(Level.Trial)
    public void close() {
        CL.clFinish(queue);
        CL.clReleaseMemObject(rawBuffer);
        CL.clReleaseKernel(kernel);
        CL.clReleaseProgram(program);
        CL.clReleaseKernel(opsScale);
        CL.clReleaseProgram(opsProgram);
        buffer.close();
        manager.close();
    }

    @Benchmark
    @OperationsPerInvocation(STEPS)
    public void rawChain() {
        cl_event last = null;
        for (int i = 0; i < STEPS / 2; i++) {
            CL.clReleaseEvent(KernelLaunchCost.rawLaunch(queue, kernel, rawBuffer));
            if (last != null) {
                CL.clReleaseEvent(last);
            }
            last = opsScale(rawBuffer);
        }
        check(CL.clWaitForEvents(1, new cl_event[] {last}));
        CL.clReleaseEvent(last);
    }

    @Benchmark
    @OperationsPerInvocation(STEPS)
    public void accessChain() {
        CompletableFuture<Void> last = null;
        for (int i = 0; i < STEPS / 2; i++) {
            try (BufferAccess access = buffer.deviceAccess(AccessMode.READ_WRITE)) {
                OpenClDeviceHandle handle = access.handle(OpenClDeviceHandle.class);
                CL.clReleaseEvent(launchInAccess(handle.memory(), handle.offset()));
            }
            last = manager.ops().scaleAsync(buffer, 1.0);
        }
        last.join();
    }

    /** The nanoseconds {@code pairedChains} spent in each chain, this iteration. */
    @State(Scope.Thread)
    @AuxCounters(AuxCounters.Type.EVENTS)
    public static class Paired {
        public long rawNanos;
        public long accessNanos;
        private boolean rawFirst;

        @Setup(Level.Iteration)
        public void reset() {
            rawNanos = 0;
            accessNanos = 0;
        }
    }

    @Benchmark
    @OperationsPerInvocation(2 * STEPS)
    public void pairedChains(Paired paired) {
        paired.rawFirst = !paired.rawFirst;
        if (paired.rawFirst) {
            paired.rawNanos += timed(this::rawChain);
            paired.accessNanos += timed(this::accessChain);
        } else {
            paired.accessNanos += timed(this::accessChain);
            paired.rawNanos += timed(this::rawChain);
        }
    }

    private static long timed(Runnable chain) {
        long start = System.nanoTime();
        chain.run();
        return System.nanoTime() - start;
    }

    /** The op set's {@code scale_f32} with 1 as the backend launches it: global size the count rounded up to 64, local left to the device. */
    private cl_event opsScale(cl_mem memory) {
        check(CL.clSetKernelArg(opsScale, 0, Sizeof.cl_mem, Pointer.to(memory)));
        check(CL.clSetKernelArg(opsScale, 1, Sizeof.cl_ulong, Pointer.to(new long[] {0})));
        check(CL.clSetKernelArg(opsScale, 2, Sizeof.cl_ulong, Pointer.to(new long[] {N})));
        check(CL.clSetKernelArg(opsScale, 3, Sizeof.cl_float, Pointer.to(new float[] {1.0f})));
        cl_event done = new cl_event();
        check(CL.clEnqueueNDRangeKernel(queue, opsScale, 1, null, new long[] {N}, null, 0, null, done));
        check(CL.clFlush(queue));
        return done;
    }

    /**
     * {@code x[i] *= 1} over the floats of an access's sub-buffer: {@code rawChain}'s launch without its flush, which the
     * access's end does (the handle's documented use).
     */
    private cl_event launchInAccess(cl_mem memory, long offset) {
        if (offset != 0) {
            throw new IllegalStateException("the benchmark's buffer starts a block: its handle is a sub-buffer at offset 0");
        }
        return KernelLaunchCost.enqueueLaunch(queue, kernel, memory);
    }
}
