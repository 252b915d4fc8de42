package dev.compute.boot.actuate.memorymap;

import dev.compute.boot.ComputeMemoryAutoConfiguration;
import dev.compute.boot.actuate.ComputeMemoryStatisticsAutoConfiguration;
import dev.compute.boot.actuate.ObservedManagers;
import org.springframework.boot.actuate.autoconfigure.endpoint.condition.ConditionalOnAvailableEndpoint;
import org.springframework.boot.actuate.autoconfigure.endpoint.expose.EndpointExposure;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBooleanProperty;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.context.annotation.Bean;

/**
 * The {@code computememorymap} endpoint (the memory map page), when Actuator is on the class path and the endpoint
 * is exposed over the web (it is not by default: {@code management.endpoints.web.exposure.include=computememory,computememorymap}).
 */
@AutoConfiguration(after = ComputeMemoryStatisticsAutoConfiguration.class)
@ConditionalOnClass(name = "org.springframework.boot.actuate.autoconfigure.endpoint.condition.ConditionalOnAvailableEndpoint")
@ConditionalOnBean(ObservedManagers.class)
@ConditionalOnBooleanProperty(name = ComputeMemoryAutoConfiguration.ENABLED_PROPERTY, matchIfMissing = true)
public final class ComputeMemoryMapEndpointAutoConfiguration {

    @Bean
    @ConditionalOnMissingBean
    @ConditionalOnAvailableEndpoint(exposure = EndpointExposure.WEB)
    ComputeMemoryMapEndpoint computeMemoryMapEndpoint() {
        return new ComputeMemoryMapEndpoint();
    }
}
