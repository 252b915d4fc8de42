package dev.compute.memory.contract;

import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.UnifiedMemoryManagerBuilder;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;

/** Mapped files on the simulated discrete device: DEVICE memory apart from the host, as on a GPU. */
class SimulatedMappedFileContractTest extends MappedFileContractTest {
    @Override
    protected UnifiedMemoryManagerBuilder builder() {
        return UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend());
    }
}
