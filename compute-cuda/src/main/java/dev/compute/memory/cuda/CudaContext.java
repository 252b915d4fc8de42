package dev.compute.memory.cuda;

import static dev.compute.memory.cuda.DriverCalls.cuCtxSetCurrent;
import static dev.compute.memory.cuda.DriverCalls.cuDeviceGet;
import static dev.compute.memory.cuda.DriverCalls.cuDevicePrimaryCtxRelease;
import static dev.compute.memory.cuda.DriverCalls.cuDevicePrimaryCtxRetain;
import static dev.compute.memory.cuda.DriverCalls.cuInit;

import dev.compute.memory.BackendUnavailableException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import jcuda.driver.CUdevice;
import jcuda.driver.CUresult;
import org.jspecify.annotations.Nullable;

/**
 * One device's primary context, the one the CUDA runtime and other libraries share, retained for as long as a
 * backend runs on it. Any thread may call into the backend: each entry point calls {@link #makeCurrent()}, a
 * {@code cuCtxGetCurrent} downcall (through FFM, cheaper than JCuda's JNI call) and a {@code cuCtxSetCurrent} only when the thread
 * has another context or none. Several backends (devices) in one JVM each keep their own.
 */
final class CudaContext implements AutoCloseable {

    private static final System.Logger LOG = System.getLogger(CudaBackend.class.getName());

    final int ordinal;
    /** The {@code CUdevice} value, which {@code CUmemLocation.id} names. */
    final int deviceId;
    final CUdevice device = new CUdevice();
    final DriverLibrary driver;
    private final ContextHandle context = new ContextHandle();
    private final ThreadLocal<MemorySegment> scratch = ThreadLocal.withInitial(() -> Arena.ofAuto().allocate(ValueLayout.JAVA_LONG));
    private boolean closed;
    /** The failure that found the context lost (a sticky error); null while it is usable. */
    private volatile @Nullable CudaContextLostException lost;

    CudaContext(DriverLibrary driver, int ordinal) {
        this.driver = driver;
        this.ordinal = ordinal;
        CudaResults.check(cuInit(0), "cuInit");
        CudaResults.check(cuDeviceGet(device, ordinal), "cuDeviceGet(" + ordinal + ")");
        this.deviceId = driver.device(ordinal);
        int retained = cuDevicePrimaryCtxRetain(context, device);
        if (retained == CUresult.CUDA_ERROR_DEVICE_UNAVAILABLE) {
            // the probe passed the device (another process took it since, or the probe was not asked): said as the probe says it
            throw new BackendUnavailableException(CudaBackend.NAME, "device " + ordinal + " is unavailable (cuDevicePrimaryCtxRetain: "
                    + CudaResults.name(retained) + "): it is in exclusive-process compute mode and another process holds it"
                    + " (nvidia-smi lists it), or in prohibited compute mode");
        }
        CudaResults.check(retained, "cuDevicePrimaryCtxRetain(device " + ordinal + ")");
        try {
            makeCurrent();
        } catch (RuntimeException | Error e) {
            cuDevicePrimaryCtxRelease(device); // no backend will hold the reference: it would keep the context for good
            throw e;
        }
    }

    /**
     * Makes this device's context current on the calling thread, if it is not already. The driver keeps it per OS thread,
     * and a virtual thread that waits (a park, a lock, a monitor) may go on on another carrier thread, where another
     * context or none is current: so it is made current again after each wait, before the next driver call.
     */
    void makeCurrent() {
        if (driver.currentContext(scratch.get()) != context.handle()) {
            CudaResults.check(cuCtxSetCurrent(context), "cuCtxSetCurrent(device " + ordinal + ")");
        }
    }

    /**
     * Records that the context is lost, as {@code failure} found, and says so once: from now on {@link #requireUsable}
     * refuses work. The driver answers the sticky error to every call until the context is reset, which needs every
     * holder of the primary context in the process to release it.
     */
    void lost(CudaContextLostException failure) {
        synchronized (this) {
            if (lost != null) {
                return;
            }
            lost = failure;
        }
        LOG.log(System.Logger.Level.ERROR, "CUDA device " + ordinal + ": " + failure.getMessage() + ". The backend refuses"
                + " further work on it; close the manager, and restart the process to use the device again");
    }

    /** Throws a {@link CudaContextLostException} once the context is known to be lost, without calling the driver. */
    void requireUsable() {
        CudaContextLostException failure = lost;
        if (failure != null) {
            throw new CudaContextLostException(failure, "the context of CUDA device " + ordinal + " was lost (" + failure.getMessage()
                    + "); the backend refuses further work: close the manager, and restart the process to use the device again");
        }
    }

    /** The primary context's handle (a JCuda {@code CUcontext}). */
    ContextHandle handle() {
        return context;
    }

    @Override
    public synchronized void close() {
        if (!closed) {
            closed = true;
            CudaResults.check(cuDevicePrimaryCtxRelease(device), "cuDevicePrimaryCtxRelease(device " + ordinal + ")");
        }
    }
}
