package dev.compute.sample;

import dev.compute.memory.UnifiedMemoryManager;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/** Chooses the {@link ClampKernel} for the backend the manager runs on. */
@Configuration(proxyBeanMethods = false)
class ClampKernelConfiguration {

    @Bean
    ClampKernel clampKernel(UnifiedMemoryManager manager) {
        return forBackend(manager.backendInfo().backend());
    }

    static ClampKernel forBackend(String backend) {
        return switch (backend) {
            case "cpu" -> new CpuClampKernel();
            case "opencl" -> new OpenClClampKernel();
            // No kernel of our own for it (CUDA): run in Java on the host copy.
            default -> new HostCopyClampKernel();
        };
    }
}
