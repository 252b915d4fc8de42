package dev.compute.memory.cpu;

import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.contract.KernelContractTest;
import java.time.Duration;

/** One's own kernels on the CPU backend: Java kernels over the memory itself, at every location. */
class CpuKernelContractTest extends KernelContractTest {
    @Override
    protected UnifiedMemoryManager newManager() {
        return UnifiedMemoryManager.builder().backend("cpu").leakDetection(LeakDetectionLevel.PARANOID)
                .timelineInterval(Duration.ZERO).build();
    }
}
