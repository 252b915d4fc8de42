package dev.compute.memory.contract;

import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;

/** The contract on the simulated discrete device: host and device memory apart, as on a GPU. */
class SimulatedDiscreteBackendContractTest extends BackendContractTest {
    @Override
    protected UnifiedMemoryManager newManager() {
        return UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend())
                .leakDetection(LeakDetectionLevel.PARANOID).timelineInterval(java.time.Duration.ZERO).build();
    }
}
