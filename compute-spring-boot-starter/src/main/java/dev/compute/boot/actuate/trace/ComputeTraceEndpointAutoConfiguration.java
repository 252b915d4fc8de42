package dev.compute.boot.actuate.trace;

import dev.compute.boot.ComputeMemoryAutoConfiguration;
import dev.compute.boot.ComputeProperties;
import dev.compute.boot.UnifiedMemoryManagerFactory;
import dev.compute.boot.actuate.ComputeMemoryStatisticsAutoConfiguration;
import dev.compute.boot.actuate.ObservedManagers;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.actuate.autoconfigure.endpoint.condition.ConditionalOnAvailableEndpoint;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBooleanProperty;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.annotation.Bean;

/**
 * The {@code computetrace} endpoint, over the managers the other endpoints observe, when Actuator is on the class path
 * and the endpoint is both granted access and exposed.
 */
@AutoConfiguration(after = {ComputeMemoryAutoConfiguration.class, ComputeMemoryStatisticsAutoConfiguration.class})
@ConditionalOnClass(name = "org.springframework.boot.actuate.autoconfigure.endpoint.condition.ConditionalOnAvailableEndpoint")
@ConditionalOnBean(ObservedManagers.class)
@ConditionalOnBooleanProperty(name = ComputeMemoryAutoConfiguration.ENABLED_PROPERTY, matchIfMissing = true)
@EnableConfigurationProperties(ComputeProperties.class)
public final class ComputeTraceEndpointAutoConfiguration {

    @Bean
    @ConditionalOnMissingBean
    @ConditionalOnAvailableEndpoint
    ComputeTraceEndpoint computeTraceEndpoint(ObservedManagers managers, ComputeProperties properties,
            ObjectProvider<UnifiedMemoryManagerFactory> factory) {
        // a named manager's own compute.managers.NAME.memory.recording.*; a manager of the application's own has compute.memory's
        return new ComputeTraceEndpoint(managers, name -> factory.stream().flatMap(each -> each.recordingOf(name).stream()).findFirst()
                .orElse(properties.memory().recording()));
    }
}
