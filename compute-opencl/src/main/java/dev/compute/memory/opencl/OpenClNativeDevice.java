package dev.compute.memory.opencl;

import dev.compute.memory.spi.NativeDevice;
import org.jocl.cl_command_queue;
import org.jocl.cl_context;
import org.jocl.cl_device_id;

/**
 * The OpenCL backend's context, device and queue, for code that builds its own programs on the manager's device:
 * {@code manager.nativeDevice(OpenClNativeDevice.class)}, at start-up, before any buffer exists.
 *
 * <pre>{@code
 * OpenClNativeDevice cl = memory.nativeDevice(OpenClNativeDevice.class);
 * cl_program program = clCreateProgramWithSource(cl.context(), 1, new String[] {source}, null, null);
 * clBuildProgram(program, 1, new cl_device_id[] {cl.device()}, null, null, null);
 * }</pre>
 *
 * <p>Programs and kernels made in {@link #context()} run on every buffer of the manager (through a device access's
 * {@link OpenClDeviceHandle}). Work queued on {@link #queue()} is ordered with the backend's copies, ops and kernels;
 * work on a buffer must still go through a device access, which holds the buffer and records the work. Release what
 * you make before the manager closes; do not release what this gives. Its methods throw
 * {@link IllegalStateException} once the backend is closed. Most code needs none of this:
 * {@code manager.kernels()} compiles and launches OpenCL C kernels with the buffers as arguments.
 */
public final class OpenClNativeDevice implements NativeDevice {

    private final OpenClBackend backend;

    OpenClNativeDevice(OpenClBackend backend) {
        this.backend = backend;
    }

    /** The context every buffer of the manager lives in. */
    public cl_context context() {
        backend.checkOpen();
        return backend.context();
    }

    public cl_device_id device() {
        backend.checkOpen();
        return backend.deviceId();
    }

    /**
     * The backend's in-order queue: what runs here is ordered with the backend's copies, ops and kernels. Once it is
     * handed out, each blocking copy of the backend first waits (bounded by the device wait) for what is queued ahead
     * of it, since anything may be; work queued inside a device access needs no such care (use its handle's queue).
     */
    public cl_command_queue queue() {
        backend.checkOpen();
        return backend.queue().handOut();
    }

    /** {@code CL_DEVICE_MEM_BASE_ADDR_ALIGN} in bytes: a sub-buffer's origin must be a multiple of it. */
    public long subBufferAlignment() {
        return backend.subBufferAlignment();
    }

    /** Whether the device has {@code cl_khr_fp64} (kernels with {@code double} build only there). */
    public boolean hasDoublePrecision() {
        return backend.hasDoublePrecision();
    }

    /** The device, its type and version, and its platform, in words. */
    public String describe() {
        return backend.device().describe();
    }

    @Override
    public String toString() {
        return "OpenClNativeDevice[" + describe() + "]";
    }
}
