package dev.compute.boot.actuate;

import dev.compute.boot.ComputeMemoryAutoConfiguration;
import dev.compute.memory.UnifiedMemoryManager;
import java.util.Map;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBooleanProperty;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.context.annotation.Bean;

/** The one {@link ObservedManagers} (each with its {@link RecentMemoryStatistics}) that the endpoint, the health contributor and the meters share. */
@AutoConfiguration(after = ComputeMemoryAutoConfiguration.class)
@ConditionalOnBean(UnifiedMemoryManager.class)
@ConditionalOnBooleanProperty(name = ComputeMemoryAutoConfiguration.ENABLED_PROPERTY, matchIfMissing = true)
public final class ComputeMemoryStatisticsAutoConfiguration {

    @Bean
    @ConditionalOnMissingBean
    ObservedManagers observedManagers(Map<String, UnifiedMemoryManager> managers, ObjectProvider<UnifiedMemoryManager> primary) {
        return new ObservedManagers(managers, primary.getIfUnique());
    }
}
