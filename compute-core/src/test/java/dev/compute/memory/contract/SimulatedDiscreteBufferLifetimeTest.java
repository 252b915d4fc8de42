package dev.compute.memory.contract;

import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import java.time.Duration;

/** The lifetime rule on the simulated discrete device: host mirrors and device copies apart, as on a GPU. */
class SimulatedDiscreteBufferLifetimeTest extends BufferLifetimeContractTest {
    @Override
    protected UnifiedMemoryManager newManager() {
        return UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend())
                .leakDetection(LeakDetectionLevel.PARANOID).timelineInterval(Duration.ZERO).build();
    }
}
