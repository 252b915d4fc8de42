package dev.compute.memory.contract;

import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.UnifiedMemoryManagerBuilder;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import java.time.Duration;

/** The allocation contract on the simulated discrete device (plain segments, a 1 GiB device). */
class SimulatedDiscreteAllocationTest extends AllocationContractTest {
    @Override
    protected UnifiedMemoryManagerBuilder builder() {
        return UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend()).timelineInterval(Duration.ZERO);
    }
}
