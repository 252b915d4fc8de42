package dev.compute.memory.cuda;

import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.UnifiedMemoryManagerBuilder;
import dev.compute.memory.contract.MappedFileContractTest;
import dev.compute.memory.spi.BackendSettings;

/**
 * Mapped files on CUDA, chosen by name as a user would; skips without a GPU. Copies to DEVICE memory go through the
 * pinned staging lanes; ops on HOST memory, a mapped file's included, run on the host, as CUDA's kernels cannot reach it.
 */
class CudaMappedFileContractTest extends MappedFileContractTest {
    @Override
    protected UnifiedMemoryManagerBuilder builder() {
        CudaTestSupport.assumeCuda(BackendSettings.ofDevice(0));
        return UnifiedMemoryManager.builder().backend("cuda");
    }
}
