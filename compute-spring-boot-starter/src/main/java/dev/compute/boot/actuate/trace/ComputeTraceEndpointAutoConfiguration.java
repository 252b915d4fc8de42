package dev.compute.boot.actuate.trace;

import dev.compute.boot.ComputeMemoryAutoConfiguration;
import dev.compute.boot.ComputeProperties;
import dev.compute.memory.UnifiedMemoryManager;
import org.springframework.boot.actuate.autoconfigure.endpoint.condition.ConditionalOnAvailableEndpoint;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnSingleCandidate;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.annotation.Bean;

/**
 * The {@code computetrace} endpoint, when Actuator is on the class path, there is one manager (or a primary one:
 * choosing among several by name waits for named managers) and the endpoint is both granted access and exposed.
 */
@AutoConfiguration(after = ComputeMemoryAutoConfiguration.class)
@ConditionalOnClass(name = "org.springframework.boot.actuate.autoconfigure.endpoint.condition.ConditionalOnAvailableEndpoint")
@ConditionalOnSingleCandidate(UnifiedMemoryManager.class)
@EnableConfigurationProperties(ComputeProperties.class)
public final class ComputeTraceEndpointAutoConfiguration {

    @Bean
    @ConditionalOnMissingBean
    @ConditionalOnAvailableEndpoint
    ComputeTraceEndpoint computeTraceEndpoint(UnifiedMemoryManager manager, ComputeProperties properties) {
        return new ComputeTraceEndpoint(manager, properties.memory().recording());
    }
}
