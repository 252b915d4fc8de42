package dev.compute.memory.cuda;

import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.contract.BufferLifetimeContractTest;
import dev.compute.memory.spi.BackendSettings;
import java.time.Duration;

/** The lifetime rule on CUDA: device memory, pinned and managed memory, mirrors; skips without a GPU. */
class CudaBufferLifetimeTest extends BufferLifetimeContractTest {
    @Override
    protected UnifiedMemoryManager newManager() {
        CudaTestSupport.assumeCuda(BackendSettings.ofDevice(0));
        return UnifiedMemoryManager.builder().backend("cuda").leakDetection(LeakDetectionLevel.PARANOID)
                .timelineInterval(Duration.ZERO).build();
    }
}
