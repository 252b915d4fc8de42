package dev.compute.boot.test;

import dev.compute.memory.BackendUnavailableException;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import dev.compute.memory.spi.BackendAvailability;
import dev.compute.memory.spi.BackendSettings;
import dev.compute.memory.spi.ComputeBackend;
import dev.compute.memory.spi.ComputeBackendProvider;

/**
 * Makes {@link SimulatedDiscreteBackend} a backend users' tests choose by name, {@code compute.backend: simulated}
 * (or {@code @AutoConfigureComputeMemory(backend = "simulated")}), to test code written for a GPU on any machine.
 * Registered by this test library only, so it is never on an application's own class path; and even here
 * {@code auto} passes it over, whatever else is there: a test gets it only by asking for it.
 */
public final class SimulatedBackendProvider implements ComputeBackendProvider {

    public static final String NAME = "simulated";

    @Override
    public String name() {
        return NAME;
    }

    // Below the CPU backend's 0: even where auto would consider it, every real backend comes first.
    @Override
    public int priority() {
        return Integer.MIN_VALUE;
    }

    @Override
    public BackendAvailability availability(BackendSettings settings) {
        if (settings.deviceIndex() != 0) {
            return BackendAvailability.unavailable("the simulated backend has one device, index 0; compute.device is " + settings.deviceIndex());
        }
        return BackendAvailability.available("a discrete device simulated in software, "
                + (SimulatedDiscreteBackend.DEFAULT_DEVICE_CAPACITY >> 20) + " MiB, for tests");
    }

    @Override
    public String autoPassOverReason(BackendSettings settings) {
        return "the simulated device is for tests and is chosen only by name (compute.backend: simulated)";
    }

    @Override
    public ComputeBackend create(BackendSettings settings) {
        BackendAvailability availability = availability(settings);
        if (!availability.available()) {
            throw new BackendUnavailableException(NAME, availability.detail());
        }
        return new SimulatedDiscreteBackend();
    }
}
