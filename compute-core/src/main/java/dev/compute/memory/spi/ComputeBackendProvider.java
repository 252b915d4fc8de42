package dev.compute.memory.spi;

import java.util.Set;
import org.jspecify.annotations.Nullable;

/**
 * Found through {@link java.util.ServiceLoader} (register in
 * {@code META-INF/services/dev.compute.memory.spi.ComputeBackendProvider}). Cheap to construct: all probing
 * of drivers happens in {@link #availability}.
 */
public interface ComputeBackendProvider {

    /** The name users configure ({@code compute.backend}): {@code cpu}, {@code cuda}, {@code opencl}. */
    String name();

    /** Higher wins when the backend is {@code auto}: accelerators above the CPU. */
    int priority();

    /** Whether this backend can run here with these settings, and if not, why, in words a user can act on. */
    BackendAvailability availability(BackendSettings settings);

    /**
     * Why {@code auto} should pass this available backend over, or {@code null} to take it. An OpenCL backend
     * whose device is the processor itself (PoCL) is slower than the CPU backend on the same cores: {@code auto}
     * leaves it to users who name it.
     */
    default @Nullable String autoPassOverReason(BackendSettings settings) {
        return null;
    }

    /**
     * The backend options ({@link BackendSettings#options()}) this backend reads, or {@code null} where it does not
     * say. With a set, an option outside it stops a manager naming this backend from being built (a typo, or another
     * backend's option), and is warned about when {@code auto} chose it.
     */
    default @Nullable Set<String> options() {
        return null;
    }

    /**
     * Opens the backend on the configured device. Throws {@link dev.compute.memory.BackendUnavailableException}
     * with the reason when it cannot.
     */
    ComputeBackend create(BackendSettings settings);
}
