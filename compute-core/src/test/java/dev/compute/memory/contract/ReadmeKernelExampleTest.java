package dev.compute.memory.contract;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.KernelSource;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** The root README shows the kernel examples that the backends' tests run, and the every-backend one runs on the simulated device. */
class ReadmeKernelExampleTest {

    @Test
    void theReadmeShowsTheExamplesWordForWord() throws Exception {
        ReadmeKernelExample.assertTheReadmeShows("opencl");
        ReadmeKernelExample.assertTheReadmeShows("cuda");
        ReadmeKernelExample.assertTheReadmeShows("every backend");
    }

    @Test
    void theEveryBackendExampleRunsItsJavaKernelOnTheSimulatedDevice() {
        try (UnifiedMemoryManager memory = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend())
                .timelineInterval(Duration.ZERO).build()) {
            double[] values = ReadmeKernelExample.values();
            assertThat(ReadmeKernelExample.everyBackend(memory, values).language()).isEqualTo(KernelSource.Language.JAVA);
            ReadmeKernelExample.assertClamped(values);
        }
    }
}
