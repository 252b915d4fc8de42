package dev.compute.memory.contract;

import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import java.time.Duration;

/** One's own kernels on the simulated discrete device: Java kernels over the device copy, synced as on a GPU. */
class SimulatedKernelContractTest extends KernelContractTest {
    @Override
    protected UnifiedMemoryManager newManager() {
        return UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend())
                .leakDetection(LeakDetectionLevel.PARANOID).timelineInterval(Duration.ZERO).build();
    }
}
