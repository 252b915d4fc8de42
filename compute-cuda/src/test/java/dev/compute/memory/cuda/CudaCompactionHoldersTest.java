package dev.compute.memory.cuda;

import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.UnifiedMemoryManagerBuilder;
import dev.compute.memory.contract.CompactionHoldersContractTest;
import dev.compute.memory.spi.BackendSettings;
import java.time.Duration;

/** Compaction against a buffer's other holders on CUDA (host mirrors, streams, expandable ranges); skips without a GPU. */
class CudaCompactionHoldersTest extends CompactionHoldersContractTest {
    @Override
    protected UnifiedMemoryManagerBuilder builder() {
        CudaTestSupport.assumeCuda(BackendSettings.ofDevice(0));
        return UnifiedMemoryManager.builder().backend("cuda").timelineInterval(Duration.ZERO);
    }
}
