package dev.compute.boot.actuate.metrics;

import dev.compute.boot.ComputeBudgets;
import dev.compute.boot.ComputeMemoryAutoConfiguration;
import dev.compute.boot.MemoryEventRelays;
import dev.compute.boot.actuate.ComputeMemoryStatisticsAutoConfiguration;
import dev.compute.boot.actuate.ObservedManagers;
import io.micrometer.core.instrument.binder.MeterBinder;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBooleanProperty;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.context.annotation.Bean;

/** The {@code compute.*} meters, when Micrometer is on the class path; Spring Boot binds them to every registry. */
@AutoConfiguration(after = {ComputeMemoryAutoConfiguration.class, ComputeMemoryStatisticsAutoConfiguration.class},
        afterName = "org.springframework.boot.micrometer.metrics.autoconfigure.MetricsAutoConfiguration")
@ConditionalOnClass(MeterBinder.class)
@ConditionalOnBean(ObservedManagers.class)
@ConditionalOnBooleanProperty(name = ComputeMemoryAutoConfiguration.ENABLED_PROPERTY, matchIfMissing = true)
public final class ComputeMemoryMetricsAutoConfiguration {

    @Bean
    @ConditionalOnMissingBean
    ComputeMemoryMeterBinder computeMemoryMeterBinder(ObservedManagers managers, MemoryEventRelays relays, ObjectProvider<ComputeBudgets> budgets) {
        return new ComputeMemoryMeterBinder(managers, relays, budgets.getIfAvailable(ComputeBudgets::new));
    }
}
