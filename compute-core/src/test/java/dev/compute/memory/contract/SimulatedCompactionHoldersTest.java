package dev.compute.memory.contract;

import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.UnifiedMemoryManagerBuilder;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import java.time.Duration;

/** Compaction against a buffer's other holders on the simulated discrete device (host mirrors, plain segments). */
class SimulatedCompactionHoldersTest extends CompactionHoldersContractTest {

    @Override
    protected UnifiedMemoryManagerBuilder builder() {
        return UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend()).timelineInterval(Duration.ZERO);
    }
}
