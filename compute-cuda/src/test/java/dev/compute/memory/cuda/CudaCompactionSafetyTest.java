package dev.compute.memory.cuda;

import dev.compute.memory.contract.CompactionSafetyContractTest;
import dev.compute.memory.spi.BackendSettings;

/** The compaction races on CUDA, each in a JVM of its own; skips without a GPU. */
class CudaCompactionSafetyTest extends CompactionSafetyContractTest {
    @Override
    protected String backend() {
        return "cuda";
    }

    @Override
    protected void assumeBackend() {
        CudaTestSupport.assumeCuda(BackendSettings.ofDevice(0));
    }
}
