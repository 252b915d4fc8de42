package dev.compute.memory.cpu;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.KernelSource;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.contract.ReadmeKernelExample;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** The root README's every-backend kernel example, as it stands there, on the CPU backend: its Java kernel runs. */
class CpuReadmeKernelExampleTest {

    @Test
    void theEveryBackendExampleCompilesAndRuns() {
        try (UnifiedMemoryManager memory = UnifiedMemoryManager.builder().backend("cpu").timelineInterval(Duration.ZERO).build()) {
            double[] values = ReadmeKernelExample.values();
            assertThat(ReadmeKernelExample.everyBackend(memory, values).language()).isEqualTo(KernelSource.Language.JAVA);
            ReadmeKernelExample.assertClamped(values);
        }
    }
}
