package dev.compute.memory.cuda;

import dev.compute.memory.spi.BackendAvailability;
import org.jspecify.annotations.Nullable;

/**
 * Whether CUDA can run here, found through FFM downcalls only: {@code libcuda.so.1} loads, {@code cuInit}
 * succeeds, the driver supports CUDA 12 or later, the configured device exists and its compute mode lets this process
 * have it, and JCuda's natives load.
 * {@link #decide} is the pure part (what a set of findings means), kept apart so it is tested without a GPU.
 */
final class DriverProbe {

    /** CUDA 12.0 as {@code cuDriverGetVersion} reports it; the committed PTX is ISA 8.0, which needs it. */
    static final int MINIMUM_DRIVER_VERSION = 12000;
    static final int CUDA_ERROR_NO_DEVICE = 100;
    /** What retaining a device's context answers while the device's compute mode keeps it from this process. */
    static final int CUDA_ERROR_DEVICE_UNAVAILABLE = 46;
    /**
     * Compute capability 7.0 (Volta) as {@link DriverLibrary#computeCapability} gives it: the op set's PTX is
     * {@code .target sm_70} ({@code PtxResourcesTest}), which the driver cannot compile for an older GPU.
     */
    static final int MINIMUM_COMPUTE_CAPABILITY = 70;

    /**
     * What the probe found; {@code initResult} is cuInit's CUresult, the rest is meaningful only after a successful init,
     * {@code deviceName}, {@code computeCapability} ({@code 10 * major + minor}), {@code computeMode} and
     * {@code contextResult} only for a device that exists. {@code contextResult} is the CUresult of retaining the primary
     * context, tried in exclusive-process mode only, where another process may hold the device (else success).
     */
    record Findings(@Nullable String libraryMissing, int initResult, int driverVersion, int deviceCount,
                    int deviceIndex, String deviceName, int computeCapability, int computeMode, int contextResult,
                    @Nullable String jcudaMissing) {}

    private DriverProbe() {}

    static BackendAvailability probe(int deviceIndex) {
        DriverLibrary library = DriverLibrary.loadedOrNull();
        if (library == null) {
            return decide(new Findings(DriverLibrary.unavailableReason(), 0, 0, 0, deviceIndex, "", 0, 0, CudaResults.SUCCESS, null));
        }
        int init = library.init();
        if (init != CudaResults.SUCCESS) {
            return decide(new Findings(null, init, 0, 0, deviceIndex, "", 0, 0, CudaResults.SUCCESS, null));
        }
        int version = library.driverVersion();
        int count = library.deviceCount();
        boolean exists = deviceIndex < count;
        int device = exists ? library.device(deviceIndex) : 0;
        String name = exists ? library.deviceName(device) : "";
        int computeCapability = exists ? library.computeCapability(device) : 0;
        int computeMode = exists ? library.computeMode(device) : 0;
        // a context made and released at once: the only way to learn whether another process holds the device
        int context = computeMode == DriverLibrary.COMPUTE_MODE_EXCLUSIVE_PROCESS ? library.tryPrimaryContext(device) : CudaResults.SUCCESS;
        String jcuda = version >= MINIMUM_DRIVER_VERSION && exists && computeCapability >= MINIMUM_COMPUTE_CAPABILITY ? jcudaLoadFailure() : null;
        return decide(new Findings(null, init, version, count, deviceIndex, name, computeCapability, computeMode, context, jcuda));
    }

    static BackendAvailability decide(Findings f) {
        if (f.libraryMissing() != null) {
            return BackendAvailability.unavailable(f.libraryMissing());
        }
        if (f.initResult() == CUDA_ERROR_NO_DEVICE) {
            return BackendAvailability.unavailable("the NVIDIA driver is installed but reports no CUDA device (cuInit: "
                    + CudaResults.name(f.initResult()) + ")");
        }
        if (f.initResult() != CudaResults.SUCCESS) {
            return BackendAvailability.unavailable("cuInit failed: " + CudaResults.name(f.initResult())
                    + " (a driver/kernel module mismatch, or no access to /dev/nvidia*)");
        }
        if (f.driverVersion() < MINIMUM_DRIVER_VERSION) {
            return BackendAvailability.unavailable("the NVIDIA driver is too old: it supports CUDA " + version(f.driverVersion())
                    + ", this backend needs CUDA 12.0 or later; update the driver");
        }
        if (f.deviceCount() == 0) {
            return BackendAvailability.unavailable("the NVIDIA driver reports no CUDA device");
        }
        if (f.deviceIndex() >= f.deviceCount()) {
            return BackendAvailability.unavailable("device index " + f.deviceIndex() + " is out of range: there "
                    + (f.deviceCount() == 1 ? "is 1 CUDA device (index 0)" : "are " + f.deviceCount() + " CUDA devices (0 to " + (f.deviceCount() - 1) + ")")
                    + "; set compute.device");
        }
        if (f.computeCapability() < MINIMUM_COMPUTE_CAPABILITY) {
            return BackendAvailability.unavailable("device " + f.deviceIndex() + " (" + f.deviceName() + ") has compute capability "
                    + capability(f.computeCapability()) + "; this backend's kernels are PTX for compute capability "
                    + capability(MINIMUM_COMPUTE_CAPABILITY) + " (Volta) or later, which the driver cannot compile for it");
        }
        if (f.computeMode() == DriverLibrary.COMPUTE_MODE_PROHIBITED) {
            return BackendAvailability.unavailable("device " + f.deviceIndex() + " (" + f.deviceName() + ") is in prohibited compute"
                    + " mode: the driver lets no process use it (nvidia-smi -q shows its Compute Mode; an administrator sets it back"
                    + " with nvidia-smi -i " + f.deviceIndex() + " -c DEFAULT)");
        }
        if (f.contextResult() != CudaResults.SUCCESS) {
            return BackendAvailability.unavailable("device " + f.deviceIndex() + " (" + f.deviceName() + ") is in exclusive-process"
                    + " compute mode and its context cannot be had here (cuDevicePrimaryCtxRetain: " + CudaResults.name(f.contextResult())
                    + ")" + (f.contextResult() == CUDA_ERROR_DEVICE_UNAVAILABLE ? ": another process holds the device (nvidia-smi lists it)" : ""));
        }
        if (f.jcudaMissing() != null) {
            return BackendAvailability.unavailable(f.jcudaMissing());
        }
        return BackendAvailability.available("CUDA driver " + version(f.driverVersion()) + ", " + f.deviceCount()
                + " device(s); device " + f.deviceIndex() + ": " + f.deviceName());
    }

    /** {@code 7.5} for 75. */
    static String capability(int computeCapability) {
        return computeCapability / 10 + "." + computeCapability % 10;
    }

    static String version(int driverVersion) {
        return driverVersion / 1000 + "." + driverVersion % 1000 / 10;
    }

    /** Loads JCuda's driver binding (its natives come from the jcuda-natives jar); the reason when that fails. */
    private static @Nullable String jcudaLoadFailure() {
        try {
            Class.forName("jcuda.driver.JCudaDriver", true, DriverProbe.class.getClassLoader());
            return null;
        } catch (ClassNotFoundException e) {
            return "JCuda is not on the class path: add org.jcuda:jcuda:12.6.0";
        } catch (LinkageError e) {
            return "JCuda's native library did not load (" + e + "): add org.jcuda:jcuda-natives:12.6.0 with the classifier"
                    + " of this platform (linux-x86_64)";
        }
    }
}
