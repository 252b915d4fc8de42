package dev.compute.memory.cuda;

import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.UnifiedMemoryManagerBuilder;
import dev.compute.memory.contract.AllocationContractTest;
import dev.compute.memory.spi.BackendSettings;
import java.time.Duration;

/** The allocation contract on CUDA (expandable ranges through the driver's virtual memory API); skips without a GPU. */
class CudaAllocationTest extends AllocationContractTest {
    @Override
    protected UnifiedMemoryManagerBuilder builder() {
        CudaTestSupport.assumeCuda(BackendSettings.ofDevice(0));
        return UnifiedMemoryManager.builder().backend("cuda").timelineInterval(Duration.ZERO);
    }
}
