package dev.compute.memory.cuda;

import dev.compute.memory.contract.CompactionCallerSafetyContractTest;
import dev.compute.memory.spi.BackendSettings;
import org.junit.jupiter.api.BeforeEach;

/** Compactions, trims and cache releases at once among users on CUDA, in a JVM of its own; skips without a GPU. */
class CudaCompactionCallerSafetyTest extends CompactionCallerSafetyContractTest {
    @BeforeEach
    void requireCuda() {
        CudaTestSupport.assumeCuda(BackendSettings.ofDevice(0));
    }

    @Override
    protected String backend() {
        return "cuda";
    }
}
