package dev.compute.boot.testing;

import dev.compute.memory.BackendUnavailableException;
import dev.compute.memory.spi.BackendAvailability;
import dev.compute.memory.spi.BackendSettings;
import dev.compute.memory.spi.ComputeBackend;
import dev.compute.memory.spi.ComputeBackendProvider;
import org.jspecify.annotations.Nullable;

/**
 * A provider of an accelerator that is never attached, as CUDA is on a machine without a GPU: it outranks the CPU
 * backend, so {@code auto} has to pass it over, and naming it must fail start-up with its reason. It keeps the
 * settings it was last probed with, so tests can see what the starter passed to a backend.
 */
public final class UnattachedDeviceBackendProvider implements ComputeBackendProvider {

    public static final String NAME = "unattached";
    public static final String REASON = "no unattached device is present (it is a test provider that never runs)";

    private static volatile @Nullable BackendSettings lastProbed;

    public static @Nullable BackendSettings lastProbed() {
        return lastProbed;
    }

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public int priority() {
        return 1000;
    }

    @Override
    public BackendAvailability availability(BackendSettings settings) {
        lastProbed = settings;
        return BackendAvailability.unavailable(REASON);
    }

    @Override
    public ComputeBackend create(BackendSettings settings) {
        throw new BackendUnavailableException(NAME, REASON);
    }
}
