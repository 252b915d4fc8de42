package dev.compute.sample;

import static org.jocl.CL.CL_PROGRAM_BUILD_LOG;
import static org.jocl.CL.CL_SUCCESS;

import dev.compute.memory.AccessMode;
import dev.compute.memory.BufferAccess;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.opencl.OpenClDeviceHandle;
import dev.compute.memory.opencl.OpenClException;
import java.nio.charset.StandardCharsets;
import org.jocl.CL;
import org.jocl.Pointer;
import org.jocl.Sizeof;
import org.jocl.cl_device_id;
import org.jocl.cl_event;
import org.jocl.cl_kernel;
import org.jocl.cl_program;
import org.jspecify.annotations.Nullable;

/**
 * The clamp on the OpenCL backend: an OpenCL C kernel of the service's own, built on the backend's context the
 * first time it runs and launched on the device access's buffer and queue ({@link OpenClDeviceHandle}). The
 * launch's event is recorded on the handle, so the buffer counts the kernel as in flight: the copy out and the
 * buffer's close wait for it. One instance serves one manager (one context); the bean's close releases the
 * program before the manager closes.
 */
final class OpenClClampKernel implements ClampKernel, AutoCloseable {

    // FLOAT64 needs cl_khr_fp64: on a device without it the build fails, and the message carries the build log.
    private static final String SOURCE = """
            #pragma OPENCL EXTENSION cl_khr_fp64 : enable
            __kernel void clamp_f64(__global double *x, ulong offset, ulong n, double lo, double hi) {
                for (ulong i = get_global_id(0); i < n; i += get_global_size(0)) {
                    x[offset + i] = clamp(x[offset + i], lo, hi);
                }
            }
            """;
    /** The kernel walks the data with the grid's stride: more work-items than this buy nothing. */
    private static final long MAX_GLOBAL_SIZE = 1L << 20;

    private record Built(cl_program program, cl_kernel kernel) {}

    private @Nullable Built built;
    private boolean closed;

    @Override
    public void clamp(UnifiedBuffer values, double min, double max) {
        try (BufferAccess access = values.deviceAccess(AccessMode.READ_WRITE)) {
            launch(access.handle(OpenClDeviceHandle.class), values.elementCount(), min, max);
        } // the access ends: the recorded launch is in flight, the device copy is the newer one
    }

    /**
     * Enqueues the kernel over {@code n} doubles of the handle's buffer. Under this object's lock: a kernel's
     * arguments are shared state, and close() must not release the kernel between the arguments and the launch.
     */
    synchronized void launch(OpenClDeviceHandle cl, long n, double min, double max) {
        if (cl.offset() % Double.BYTES != 0) {
            throw new IllegalArgumentException("FLOAT64 values must start at a multiple of 8 bytes; these start at " + cl.offset());
        }
        cl_kernel kernel = kernel(cl);
        setArgument(kernel, 0, Sizeof.cl_mem, Pointer.to(cl.memory()));
        setArgument(kernel, 1, Sizeof.cl_ulong, Pointer.to(new long[] {cl.offset() / Double.BYTES}));
        setArgument(kernel, 2, Sizeof.cl_ulong, Pointer.to(new long[] {n}));
        setArgument(kernel, 3, Sizeof.cl_double, Pointer.to(new double[] {min}));
        setArgument(kernel, 4, Sizeof.cl_double, Pointer.to(new double[] {max}));
        long globalSize = Math.min(Math.ceilDiv(n, 64) * 64, MAX_GLOBAL_SIZE);
        cl_event done = new cl_event();
        check(CL.clEnqueueNDRangeKernel(cl.queue(), kernel, 1, null, new long[] {globalSize}, null, 0, null, done),
                "clEnqueueNDRangeKernel of clamp_f64");
        try {
            cl.recordWork(done); // the handle retains the event for itself
        } finally {
            CL.clReleaseEvent(done);
        }
    }

    private cl_kernel kernel(OpenClDeviceHandle cl) {
        if (closed) {
            throw new IllegalStateException("the clamp kernel was released: the service is shutting down");
        }
        if (built == null) {
            built = build(cl);
        }
        return built.kernel();
    }

    private static Built build(OpenClDeviceHandle cl) {
        int[] error = new int[1];
        cl_program program = CL.clCreateProgramWithSource(cl.context(), 1, new String[] {SOURCE}, null, error);
        check(error[0], "clCreateProgramWithSource of clamp_f64");
        int code = CL.clBuildProgram(program, 1, new cl_device_id[] {cl.device()}, null, null, null);
        if (code != CL_SUCCESS) {
            String log = buildLog(program, cl.device());
            CL.clReleaseProgram(program);
            throw new OpenClException("building the clamp kernel failed (FLOAT64 needs cl_khr_fp64): "
                    + CL.stringFor_errorCode(code) + "\n" + log);
        }
        cl_kernel kernel = CL.clCreateKernel(program, "clamp_f64", error);
        if (error[0] != CL_SUCCESS) {
            CL.clReleaseProgram(program);
            check(error[0], "clCreateKernel clamp_f64");
        }
        return new Built(program, kernel);
    }

    private static String buildLog(cl_program program, cl_device_id device) {
        long[] size = new long[1];
        CL.clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, null, size);
        byte[] log = new byte[(int) size[0]];
        CL.clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, log.length, Pointer.to(log), null);
        return new String(log, StandardCharsets.UTF_8).trim();
    }

    private static void setArgument(cl_kernel kernel, int index, long size, Pointer value) {
        check(CL.clSetKernelArg(kernel, index, size, value), "clSetKernelArg " + index + " of clamp_f64");
    }

    private static void check(int code, String what) {
        if (code != CL_SUCCESS) {
            throw new OpenClException(what, code);
        }
    }

    /** Releases the kernel and the program; launches already queued keep them until they finish (OpenCL counts references). */
    @Override
    public synchronized void close() {
        closed = true;
        if (built != null) {
            CL.clReleaseKernel(built.kernel());
            CL.clReleaseProgram(built.program());
            built = null;
        }
    }
}
