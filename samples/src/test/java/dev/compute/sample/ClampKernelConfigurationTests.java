package dev.compute.sample;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.KernelSource;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.springframework.aot.hint.RuntimeHints;
import org.springframework.aot.hint.predicate.RuntimeHintsPredicates;

/** Which of the clamp's three sources each backend compiles, and what a native image must carry for them. */
class ClampKernelConfigurationTests {

    @Test
    void theCpuBackendAndTheSimulatedDeviceRunTheJavaKernel() {
        try (UnifiedMemoryManager cpu = UnifiedMemoryManager.builder().backend("cpu").timelineInterval(Duration.ZERO).build();
             UnifiedMemoryManager simulated = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend())
                     .timelineInterval(Duration.ZERO).build()) {
            assertThat(new ClampKernelConfiguration().clampKernel(cpu).source()).isEqualTo(KernelSource.java("clamp_f64", ClampKernel.JAVA));
            assertThat(new ClampKernelConfiguration().clampKernel(simulated).source().language()).isEqualTo(KernelSource.Language.JAVA);
        }
    }

    @Test
    void theOpenClBackendBuildsTheOpenClSource() {
        try (UnifiedMemoryManager opencl = OpenClTestManagers.openClManager()) {
            assertThat(new ClampKernelConfiguration().clampKernel(opencl).source())
                    .isEqualTo(KernelSource.openCl(ClampKernel.OPENCL_C, "clamp_f64"));
        }
    }

    @Test
    void thePtxNamesTheKernelTheCudaBackendLoads() {
        assertThat(ClampKernel.PTX).contains(".version 8.0", ".visible .entry clamp_f64(");
    }

    @Test
    void aNativeImageCarriesBothSources() {
        RuntimeHints hints = new RuntimeHints();
        new ClampKernelConfiguration.KernelSources().registerHints(hints, getClass().getClassLoader());
        assertThat(RuntimeHintsPredicates.resource().forResource("kernels/clamp.cl")).accepts(hints);
        assertThat(RuntimeHintsPredicates.resource().forResource("kernels/clamp.ptx")).accepts(hints);
    }
}
