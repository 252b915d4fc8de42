package dev.compute.memory.cuda;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.KernelSource;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.contract.ReadmeKernelExample;
import dev.compute.memory.spi.BackendSettings;
import org.junit.jupiter.api.Test;

/** The root README's kernel examples, as they stand there, on a GPU; skips with the reason where there is none. */
class CudaReadmeKernelExampleTest {

    @Test
    void theLinesOnCudaLoadAndRun() {
        try (UnifiedMemoryManager memory = CudaTestSupport.managerOn(CudaTestSupport.openBackend(BackendSettings.ofDevice(0))).build()) {
            double[] values = ReadmeKernelExample.values();
            ReadmeKernelExample.cuda(memory, values);
            ReadmeKernelExample.assertClamped(values);
            values = ReadmeKernelExample.values();
            assertThat(ReadmeKernelExample.everyBackend(memory, values).language()).isEqualTo(KernelSource.Language.PTX);
            ReadmeKernelExample.assertClamped(values);
        }
    }
}
