package dev.compute.boot.actuate.health;

import dev.compute.boot.ComputeMemoryAutoConfiguration;
import dev.compute.boot.ComputeProperties;
import dev.compute.boot.actuate.ComputeMemoryStatisticsAutoConfiguration;
import dev.compute.boot.actuate.RecentMemoryStatistics;
import dev.compute.memory.UnifiedMemoryManager;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.health.autoconfigure.contributor.ConditionalOnEnabledHealthIndicator;
import org.springframework.boot.health.contributor.HealthIndicator;
import org.springframework.context.annotation.Bean;

/** The {@code compute} health contributor, when Spring Boot's health support is on the class path ({@code management.health.compute.enabled}). */
@AutoConfiguration(after = {ComputeMemoryAutoConfiguration.class, ComputeMemoryStatisticsAutoConfiguration.class})
@ConditionalOnClass({HealthIndicator.class, ConditionalOnEnabledHealthIndicator.class})
@ConditionalOnBean(UnifiedMemoryManager.class)
public final class ComputeHealthContributorAutoConfiguration {

    // on the method, so the class condition above is decided before this condition's class is needed
    @Bean
    @ConditionalOnEnabledHealthIndicator("compute")
    @ConditionalOnMissingBean(name = "computeHealthIndicator")
    ComputeHealthIndicator computeHealthIndicator(UnifiedMemoryManager manager, RecentMemoryStatistics statistics,
            ComputeProperties properties) {
        return new ComputeHealthIndicator(manager, statistics, properties.health());
    }
}
