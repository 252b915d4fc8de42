package dev.compute.memory.cuda;

import dev.compute.memory.spi.NativeDevice;
import jcuda.driver.CUcontext;
import jcuda.driver.CUdevice;
import jcuda.driver.CUstream;

/**
 * The CUDA backend's device, primary context and streams, for code that builds its own work on the manager's GPU
 * (its own modules, a CUDA library): {@code manager.nativeDevice(CudaNativeDevice.class)}.
 *
 * <pre>{@code
 * CudaNativeDevice cuda = memory.nativeDevice(CudaNativeDevice.class);
 * cuda.makeCurrent();                                  // on each thread that calls the driver itself
 * cuModuleLoadData(module, ptx);                       // lands in the manager's context
 * }</pre>
 *
 * <p>The context is the device's primary context, the one the CUDA runtime and libraries share. {@link #stream()}
 * is the stream the backend orders the calling thread's copies, ops and kernels on: work queued there runs after
 * them, and it is the stream a device access opened on this thread hands out. Work on a buffer must still go through
 * a device access, which holds the buffer and records the work. Unload and destroy what you make before the manager
 * closes; do not destroy what this gives. Its methods throw {@link IllegalStateException} once the backend is closed.
 * Most code needs none of this: {@code manager.kernels()} loads PTX and launches it with the buffers as arguments.
 */
public final class CudaNativeDevice implements NativeDevice {

    private final CudaBackend backend;

    CudaNativeDevice(CudaBackend backend) {
        this.backend = backend;
    }

    /** Makes the manager's context current on the calling thread (a no-op where it is). */
    public void makeCurrent() {
        backend.currentContext();
    }

    /** The device's primary context, made current on the calling thread. */
    public CUcontext context() {
        return backend.currentContext();
    }

    public CUdevice device() {
        backend.currentContext();
        return backend.context().device;
    }

    /** The device's ordinal ({@code compute.device}). */
    public int deviceOrdinal() {
        return backend.deviceOrdinal();
    }

    /** The calling thread's stream, with the context made current: work queued here is ordered after the thread's own. */
    public CUstream stream() {
        // a call the close waits for, as a device handle's opening is: a stream made past the open check is made
        // before the close destroys the streams, not after it went through them
        return backend.streams().whileOpen(backend::enter);
    }

    @Override
    public String toString() {
        return "CudaNativeDevice[" + backend.info() + "]";
    }
}
