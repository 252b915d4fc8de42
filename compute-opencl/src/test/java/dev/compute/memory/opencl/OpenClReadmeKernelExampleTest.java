package dev.compute.memory.opencl;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.KernelSource;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.contract.ReadmeKernelExample;
import java.time.Duration;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The root README's kernel examples, as they stand there, on the OpenCL device at hand (PoCL in CI). */
class OpenClReadmeKernelExampleTest {

    @BeforeEach
    void requireOpenCl() {
        OpenClTestSupport.requireOpenCl();
    }

    @Test
    void theTenLinesOnOpenClCompileAndRun() {
        try (UnifiedMemoryManager memory = UnifiedMemoryManager.builder().backend("opencl").timelineInterval(Duration.ZERO).build()) {
            double[] values = ReadmeKernelExample.values();
            ReadmeKernelExample.openCl(memory, values);
            ReadmeKernelExample.assertClamped(values);
        }
    }

    @Test
    void theEveryBackendExampleBuildsItsOpenClSource() {
        try (UnifiedMemoryManager memory = UnifiedMemoryManager.builder().backend("opencl").timelineInterval(Duration.ZERO).build()) {
            double[] values = ReadmeKernelExample.values();
            assertThat(ReadmeKernelExample.everyBackend(memory, values).language()).isEqualTo(KernelSource.Language.OPENCL_C);
            ReadmeKernelExample.assertClamped(values);
        }
    }
}
