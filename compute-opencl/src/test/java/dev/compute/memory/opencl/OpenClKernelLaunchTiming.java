package dev.compute.memory.opencl;

import dev.compute.memory.AccessMode;
import dev.compute.memory.BufferAccess;
import dev.compute.memory.ComputeKernel;
import dev.compute.memory.DataType;
import dev.compute.memory.KernelSource;
import dev.compute.memory.LaunchShape;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.testing.LaunchRounds;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import org.jocl.CL;
import org.jocl.Pointer;
import org.jocl.Sizeof;
import org.jocl.cl_command_queue;
import org.jocl.cl_device_id;
import org.jocl.cl_event;
import org.jocl.cl_kernel;
import org.jocl.cl_mem;
import org.jocl.cl_program;

/**
 * What a launch through the kernel API costs against the same launch in raw JOCL, on the OpenCL device a manager
 * takes by default (a GPU where there is one): {@code x[i] *= a} over 4096 floats of DEVICE memory, on the backend's
 * queue in both cases. The plain-Java twin of the benchmarks module's {@code KernelLaunchCost} (JMH), for the GPU
 * machine, which has no JMH: {@code java ... dev.compute.memory.opencl.OpenClKernelLaunchTiming}. Prints the median
 * of several rounds, in microseconds a launch.
 */
public final class OpenClKernelLaunchTiming {

    private static final String SCALE = """
            __kernel void scale(__global float *x, long n, float a) {
                long i = get_global_id(0);
                if (i < n) x[i] *= a;
            }""";
    private static final int N = 4096;

    public static void main(String[] args) {
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend("opencl").timelineInterval(Duration.ZERO).build();
             UnifiedBuffer x = manager.allocate(DataType.FLOAT32, N)) {
            x.copyFrom(new float[N]);
            ComputeKernel kernel = manager.kernels().compile(KernelSource.openCl(SCALE, "scale"));
            OpenClNativeDevice cl = manager.nativeDevice(OpenClNativeDevice.class);
            cl_command_queue queue = cl.queue();
            int[] error = new int[1];
            cl_program program = CL.clCreateProgramWithSource(cl.context(), 1, new String[] {SCALE}, null, error);
            check(error[0]);
            check(CL.clBuildProgram(program, 1, new cl_device_id[] {cl.device()}, null, null, null));
            cl_kernel raw = CL.clCreateKernel(program, "scale", error);
            check(error[0]);
            cl_mem memory = CL.clCreateBuffer(cl.context(), CL.CL_MEM_READ_WRITE, (long) N * Float.BYTES, null, error);
            check(error[0]);

            Runnable rawAndWait = () -> waitFor(launch(queue, raw, memory));
            Runnable newKernelAndWait = () -> {
                cl_kernel own = CL.clCreateKernel(program, "scale", error);
                cl_event done = launch(queue, own, memory);
                CL.clReleaseKernel(own);
                waitFor(done);
            };
            Runnable accessByHand = () -> {
                cl_event done;
                try (BufferAccess access = x.deviceAccess(AccessMode.READ_WRITE)) {
                    done = launch(queue, raw, access.handle(OpenClDeviceHandle.class).memory());
                }
                waitFor(done);
            };
            Runnable apiAndJoin = () -> kernel.launch(LaunchShape.of(N), x, (long) N, 1.0f).join();
            Runnable raw10 = () -> {
                cl_event last = null;
                for (int i = 0; i < 10; i++) {
                    if (last != null) {
                        CL.clReleaseEvent(last);
                    }
                    last = launch(queue, raw, memory);
                }
                waitFor(last);
            };
            Runnable api10 = () -> {
                CompletableFuture<Void> last = null;
                for (int i = 0; i < 10; i++) {
                    last = kernel.launch(LaunchShape.of(N), x, (long) N, 1.0f);
                }
                last.join();
            };
            System.out.println("device: " + manager.backendInfo());
            System.out.printf("%-44s %12s%n", "launch of scale over 4096 floats", "us/launch");
            LaunchRounds.report("raw clEnqueueNDRangeKernel + wait", rawAndWait, 1);
            LaunchRounds.report("raw, clCreateKernel per launch + wait", newKernelAndWait, 1);
            LaunchRounds.report("device access by hand + raw launch + wait", accessByHand, 1);
            LaunchRounds.report("kernel.launch(...).join()", apiAndJoin, 1);
            LaunchRounds.report("raw: 10 launches, then wait", raw10, 10);
            LaunchRounds.report("kernel.launch x 10, then join the last", api10, 10);
            CL.clFinish(queue);
            CL.clReleaseMemObject(memory);
            CL.clReleaseKernel(raw);
            CL.clReleaseProgram(program);
        }
    }

    private static cl_event launch(cl_command_queue queue, cl_kernel kernel, cl_mem memory) {
        check(CL.clSetKernelArg(kernel, 0, Sizeof.cl_mem, Pointer.to(memory)));
        check(CL.clSetKernelArg(kernel, 1, Sizeof.cl_long, Pointer.to(new long[] {N})));
        check(CL.clSetKernelArg(kernel, 2, Sizeof.cl_float, Pointer.to(new float[] {1.0f})));
        cl_event done = new cl_event();
        check(CL.clEnqueueNDRangeKernel(queue, kernel, 1, null, new long[] {N}, new long[] {256}, 0, null, done));
        check(CL.clFlush(queue));
        return done;
    }

    private static void waitFor(cl_event event) {
        check(CL.clWaitForEvents(1, new cl_event[] {event}));
        CL.clReleaseEvent(event);
    }

    private static void check(int code) {
        if (code != CL.CL_SUCCESS) {
            throw new IllegalStateException(CL.stringFor_errorCode(code));
        }
    }
}
