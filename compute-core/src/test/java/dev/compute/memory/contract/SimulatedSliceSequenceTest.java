package dev.compute.memory.contract;

import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import java.time.Duration;

/** Slice sequences on the simulated discrete device: a host mirror and a device copy, synced as the steps need. */
class SimulatedSliceSequenceTest extends SliceSequenceContractTest {
    @Override
    protected UnifiedMemoryManager newManager() {
        return UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend()).timelineInterval(Duration.ZERO).build();
    }
}
