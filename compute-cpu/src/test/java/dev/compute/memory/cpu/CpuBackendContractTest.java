package dev.compute.memory.cpu;

import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.contract.BackendContractTest;
import java.time.Duration;

/** The backend contract on the CPU backend, chosen by name through the ServiceLoader as a user would. */
class CpuBackendContractTest extends BackendContractTest {
    @Override
    protected UnifiedMemoryManager newManager() {
        return UnifiedMemoryManager.builder().backend("cpu").leakDetection(LeakDetectionLevel.PARANOID)
                .timelineInterval(Duration.ZERO).build();
    }
}
