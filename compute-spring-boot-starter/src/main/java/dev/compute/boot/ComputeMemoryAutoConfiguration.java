package dev.compute.boot;

import dev.compute.memory.UnifiedMemoryManager;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;

/**
 * The {@link UnifiedMemoryManager} bean, built from {@code compute.*}. A manager of the user's own replaces it.
 * The manager chooses and logs its backend, and runs its own trim and sampling thread, so nothing here depends
 * on the application enabling scheduling. On shutdown it reports buffers still open and frees all memory.
 */
@AutoConfiguration
@ConditionalOnClass(UnifiedMemoryManager.class)
@EnableConfigurationProperties(ComputeProperties.class)
@Import(PoolSizeConverter.class)
public final class ComputeMemoryAutoConfiguration {

    @Bean(destroyMethod = "close")
    @ConditionalOnMissingBean
    UnifiedMemoryManager unifiedMemoryManager(ComputeProperties properties) {
        return properties.toBuilder().build();
    }
}
