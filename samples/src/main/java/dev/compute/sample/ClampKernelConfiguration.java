package dev.compute.sample;

import dev.compute.memory.UnifiedMemoryManager;
import org.springframework.aot.hint.RuntimeHints;
import org.springframework.aot.hint.RuntimeHintsRegistrar;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.ImportRuntimeHints;
import org.jspecify.annotations.Nullable;

/** The service's {@link ClampKernel}, compiled at start-up for the backend the manager runs on. */
@Configuration(proxyBeanMethods = false)
@ImportRuntimeHints(ClampKernelConfiguration.KernelSources.class)
class ClampKernelConfiguration {

    @Bean
    ClampKernel clampKernel(UnifiedMemoryManager manager) {
        return new ClampKernel(manager);
    }

    /** The kernel's OpenCL C and PTX sources, which a native image must carry as resources. */
    static final class KernelSources implements RuntimeHintsRegistrar {
        @Override
        public void registerHints(RuntimeHints hints, @Nullable ClassLoader classLoader) {
            hints.resources().registerPattern("kernels/*");
        }
    }
}
