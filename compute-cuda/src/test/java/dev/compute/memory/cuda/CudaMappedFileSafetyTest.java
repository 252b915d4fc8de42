package dev.compute.memory.cuda;

import dev.compute.memory.contract.MappedFileSafetyContractTest;
import dev.compute.memory.spi.BackendSettings;

/** The mapped-file scenarios on CUDA, each in a JVM of its own; skips without a GPU. */
class CudaMappedFileSafetyTest extends MappedFileSafetyContractTest {
    @Override
    protected String backend() {
        return "cuda";
    }

    @Override
    protected void assumeBackend() {
        CudaTestSupport.assumeCuda(BackendSettings.ofDevice(0));
    }
}
