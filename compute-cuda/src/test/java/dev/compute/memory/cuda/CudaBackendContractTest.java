package dev.compute.memory.cuda;

import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.contract.BackendContractTest;
import dev.compute.memory.spi.BackendSettings;
import java.time.Duration;

/** The backend contract on CUDA, chosen by name through the ServiceLoader as a user would; skips without a GPU. */
class CudaBackendContractTest extends BackendContractTest {
    @Override
    protected UnifiedMemoryManager newManager() {
        CudaTestSupport.assumeCuda(BackendSettings.ofDevice(0));
        return UnifiedMemoryManager.builder().backend("cuda").leakDetection(LeakDetectionLevel.PARANOID)
                .timelineInterval(Duration.ZERO).build();
    }
}
