package dev.compute.memory.cpu;

import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.contract.BufferLifetimeContractTest;
import java.time.Duration;

/** The lifetime rule on the CPU backend, where freed memory is really unmapped by a trim. */
class CpuBufferLifetimeTest extends BufferLifetimeContractTest {
    @Override
    protected UnifiedMemoryManager newManager() {
        return UnifiedMemoryManager.builder().backend("cpu").leakDetection(LeakDetectionLevel.PARANOID)
                .timelineInterval(Duration.ZERO).build();
    }
}
