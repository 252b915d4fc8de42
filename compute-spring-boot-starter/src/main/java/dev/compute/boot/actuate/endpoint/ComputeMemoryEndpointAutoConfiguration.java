package dev.compute.boot.actuate.endpoint;

import dev.compute.boot.ComputeBudgets;
import dev.compute.boot.ComputeMemoryAutoConfiguration;
import dev.compute.boot.actuate.ComputeMemoryStatisticsAutoConfiguration;
import dev.compute.boot.actuate.ObservedManagers;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.actuate.autoconfigure.endpoint.condition.ConditionalOnAvailableEndpoint;
import org.springframework.boot.actuate.autoconfigure.endpoint.expose.EndpointExposure;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBooleanProperty;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.context.annotation.Bean;

/**
 * The {@code computememory} endpoint, when Actuator is on the class path and the endpoint is exposed (it is not
 * by default: expose it with {@code management.endpoints.web.exposure.include}).
 */
@AutoConfiguration(after = {ComputeMemoryAutoConfiguration.class, ComputeMemoryStatisticsAutoConfiguration.class})
@ConditionalOnClass(name = "org.springframework.boot.actuate.autoconfigure.endpoint.condition.ConditionalOnAvailableEndpoint")
@ConditionalOnBean(ObservedManagers.class)
@ConditionalOnBooleanProperty(name = ComputeMemoryAutoConfiguration.ENABLED_PROPERTY, matchIfMissing = true)
public final class ComputeMemoryEndpointAutoConfiguration {

    @Bean
    @ConditionalOnMissingBean
    @ConditionalOnAvailableEndpoint
    ComputeMemoryEndpoint computeMemoryEndpoint(ObservedManagers managers, ObjectProvider<ComputeBudgets> budgets) {
        return new ComputeMemoryEndpoint(managers, budgets.getIfAvailable(ComputeBudgets::new));
    }

    @Bean
    @ConditionalOnMissingBean
    @ConditionalOnBean(ComputeMemoryEndpoint.class)
    @ConditionalOnAvailableEndpoint(exposure = EndpointExposure.WEB)
    ComputeMemoryEndpointWebExtension computeMemoryEndpointWebExtension(ComputeMemoryEndpoint endpoint, ObservedManagers managers) {
        return new ComputeMemoryEndpointWebExtension(endpoint, managers);
    }
}
