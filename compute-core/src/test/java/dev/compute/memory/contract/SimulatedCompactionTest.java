package dev.compute.memory.contract;

import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.UnifiedMemoryManagerBuilder;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import java.time.Duration;

/** Compaction on the simulated discrete device: device memory the host cannot address, plain segments. */
class SimulatedCompactionTest extends CompactionContractTest {
    @Override
    protected UnifiedMemoryManagerBuilder builder() {
        return UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend()).timelineInterval(Duration.ZERO);
    }
}
