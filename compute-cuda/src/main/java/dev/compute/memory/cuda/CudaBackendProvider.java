package dev.compute.memory.cuda;

import dev.compute.memory.BackendUnavailableException;
import dev.compute.memory.spi.BackendAvailability;
import dev.compute.memory.spi.BackendSettings;
import dev.compute.memory.spi.ComputeBackend;
import dev.compute.memory.spi.ComputeBackendProvider;
import java.util.Set;

/**
 * {@code compute.backend: cuda}. Available where {@code libcuda.so.1} loads, the driver supports CUDA 12 or
 * later and the configured device exists; the probe uses FFM downcalls only, so a machine without the driver
 * gets a reason instead of an {@code UnsatisfiedLinkError} from JCuda.
 */
public final class CudaBackendProvider implements ComputeBackendProvider {

    /** Above OpenCL and the CPU: on an NVIDIA machine {@code auto} picks CUDA. */
    public static final int PRIORITY = 100;

    @Override
    public String name() {
        return CudaBackend.NAME;
    }

    /** What {@link BackendSettings#options()} this backend reads (its README says what each does). */
    @Override
    public Set<String> options() {
        return Set.of("streams", "staging-buffers", "staging-lanes", "copy-threads");
    }

    @Override
    public int priority() {
        return PRIORITY;
    }

    @Override
    public BackendAvailability availability(BackendSettings settings) {
        return DriverProbe.probe(settings.deviceIndex());
    }

    @Override
    public ComputeBackend create(BackendSettings settings) {
        BackendAvailability availability = availability(settings);
        DriverLibrary driver = DriverLibrary.loadedOrNull();
        if (!availability.available() || driver == null) {
            throw new BackendUnavailableException(CudaBackend.NAME, availability.detail());
        }
        return new CudaBackend(driver, settings);
    }
}
