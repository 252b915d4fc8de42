package dev.compute.boot.actuate.health;

import dev.compute.boot.ComputeBudgets;
import dev.compute.boot.ComputeMemoryAutoConfiguration;
import dev.compute.boot.ComputeProperties;
import dev.compute.boot.actuate.ComputeMemoryStatisticsAutoConfiguration;
import dev.compute.boot.actuate.ObservedManagers;
import dev.compute.boot.actuate.ObservedManagers.ObservedManager;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBooleanProperty;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.health.autoconfigure.contributor.CompositeHealthContributorConfiguration;
import org.springframework.boot.health.autoconfigure.contributor.ConditionalOnEnabledHealthIndicator;
import org.springframework.boot.health.contributor.HealthContributor;
import org.springframework.boot.health.contributor.HealthIndicator;
import org.springframework.context.annotation.Bean;

/**
 * The {@code compute} health contributor, when Spring Boot's health support is on the class path
 * ({@code management.health.compute.enabled}): with one manager its {@link ComputeHealthIndicator}, with several a
 * composite of one per manager, by name ({@code /actuator/health/compute/gpu}), as Boot does for several DataSources.
 */
@AutoConfiguration(after = {ComputeMemoryAutoConfiguration.class, ComputeMemoryStatisticsAutoConfiguration.class})
@ConditionalOnClass({HealthIndicator.class, ConditionalOnEnabledHealthIndicator.class})
@ConditionalOnBean(ObservedManagers.class)
@ConditionalOnBooleanProperty(name = ComputeMemoryAutoConfiguration.ENABLED_PROPERTY, matchIfMissing = true)
public final class ComputeHealthContributorAutoConfiguration {

    // on the method, so the class condition above is decided before this condition's class is needed
    @Bean
    @ConditionalOnEnabledHealthIndicator("compute")
    @ConditionalOnMissingBean(name = {"computeHealthIndicator", "computeHealthContributor"})
    HealthContributor computeHealthContributor(ObservedManagers managers, ComputeProperties properties, ObjectProvider<ComputeBudgets> budgets) {
        return new PerManager(properties.health(), budgets.getIfAvailable(ComputeBudgets::new)).contributor(managers);
    }

    private static final class PerManager extends CompositeHealthContributorConfiguration<ComputeHealthIndicator, ObservedManager> {
        PerManager(ComputeProperties.Health thresholds, ComputeBudgets budgets) {
            super(observed -> new ComputeHealthIndicator(observed, thresholds, budgets));
        }

        HealthContributor contributor(ObservedManagers managers) {
            return createContributor(managers.byName());
        }
    }
}
