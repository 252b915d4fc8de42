package dev.compute.memory.cuda;

import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.UnifiedMemoryManagerBuilder;
import dev.compute.memory.contract.CompactionContractTest;
import dev.compute.memory.spi.BackendSettings;
import java.time.Duration;

/** Compaction on CUDA (expandable ranges; moves are copies within the device); skips without a GPU. */
class CudaCompactionTest extends CompactionContractTest {
    @Override
    protected UnifiedMemoryManagerBuilder builder() {
        CudaTestSupport.assumeCuda(BackendSettings.ofDevice(0));
        return UnifiedMemoryManager.builder().backend("cuda").timelineInterval(Duration.ZERO);
    }
}
