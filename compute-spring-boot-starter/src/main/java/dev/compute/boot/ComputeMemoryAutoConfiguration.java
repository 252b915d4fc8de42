package dev.compute.boot;

import dev.compute.memory.OutOfMemoryHandler;
import dev.compute.memory.UnifiedMemoryManager;
import java.util.List;
import org.springframework.beans.factory.ListableBeanFactory;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.SmartInitializingSingleton;
import org.springframework.beans.factory.config.BeanFactoryPostProcessor;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionOutcome;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBooleanProperty;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.NoneNestedConditions;
import org.springframework.boot.autoconfigure.condition.SpringBootCondition;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.ConditionContext;
import org.springframework.context.annotation.Conditional;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.core.env.ConfigurableEnvironment;
import org.springframework.core.env.Environment;
import org.springframework.core.type.AnnotatedTypeMetadata;

/**
 * The {@link UnifiedMemoryManager} beans. With {@code compute.*} alone, one, built from it, which a manager of the
 * application's own replaces. With {@code compute.managers.<name>.*}, one per name (see
 * {@link NamedManagersRegistrar}), beside any of the application's own. Each manager chooses and logs its backend,
 * and runs its own trim and sampling thread, so nothing here depends on the application enabling scheduling. On
 * shutdown each reports buffers still open and frees all memory. The budgets configured for each are made with it
 * ({@link ComputeBudgets}).
 */
@AutoConfiguration
@ConditionalOnClass(UnifiedMemoryManager.class)
@ConditionalOnBooleanProperty(name = ComputeMemoryAutoConfiguration.ENABLED_PROPERTY, matchIfMissing = true)
@EnableConfigurationProperties(ComputeProperties.class)
@Import(PoolSizeConverter.class)
public final class ComputeMemoryAutoConfiguration {

    /**
     * How the observers (endpoint, health, meters) and the customizers name a manager: its bean name less this
     * suffix, so {@code gpu} for {@code compute.managers.gpu}'s bean {@code gpuUnifiedMemoryManager}.
     */
    public static final String MANAGER_BEAN_NAME_SUFFIX = "UnifiedMemoryManager";

    /** The name of the one manager of {@code compute.*}, whose bean is {@code unifiedMemoryManager}. */
    public static final String DEFAULT_MANAGER_NAME = "default";

    /**
     * {@code compute.enabled}: {@code false} turns the whole starter off, as Spring Boot's own integrations have a
     * switch each: no manager, endpoint, health contributor or meters, and no {@code compute.*} setting is read.
     */
    public static final String ENABLED_PROPERTY = "compute.enabled";

    /** The bean that builds the starter's managers; test support builds its own through it. */
    public static final String FACTORY_BEAN = "unifiedMemoryManagerFactory";

    @Bean(FACTORY_BEAN)
    UnifiedMemoryManagerFactory unifiedMemoryManagerFactory(ConfigurableEnvironment environment, ListableBeanFactory beanFactory,
            ObjectProvider<OutOfMemoryHandler> outOfMemoryHandlers, ObjectProvider<UnifiedMemoryManagerBuilderCustomizer> customizers,
            MemoryEventRelays memoryEventRelays, ComputeBudgets computeBudgets) {
        return new UnifiedMemoryManagerFactory(environment, beanFactory, outOfMemoryHandlers, customizers, memoryEventRelays, computeBudgets);
    }

    /** A customizer kept to one manager that names none of the starter's (a typo) stops start-up, rather than customize nothing. */
    @Bean
    static SmartInitializingSingleton customizersNameTheStartersManagers(ObjectProvider<UnifiedMemoryManagerBuilderCustomizer> customizers,
            Environment environment) {
        return () -> {
            List<String> named = NamedManagers.namesIn(environment);
            List<String> managers = named.isEmpty() ? List.of(DEFAULT_MANAGER_NAME) : named;
            customizers.orderedStream().forEach(customizer -> {
                if (customizer instanceof OneManagersCustomizer one && !managers.contains(one.managerName())) {
                    throw new IllegalStateException("UnifiedMemoryManagerBuilderCustomizer.forManager(\"" + one.managerName()
                            + "\", ...) names no manager the starter builds: " + String.join(", ", managers)
                            + (named.isEmpty() ? " (the one manager of compute.*)" : " (under " + NamedManagers.PREFIX + ")"));
                }
            });
        };
    }

    /**
     * Manager and budget names are checked as written before anything binds {@code compute.*}: a name the binding
     * cannot take at all ({@code é}, which it drops, reading {@code compute.budgets.é.limit} as
     * {@code compute.budgets.limit}) would otherwise fail the binding of {@link ComputeProperties} with "No converter
     * found", naming no key.
     */
    @Bean
    static BeanFactoryPostProcessor computeNamesCheckedAsWritten(Environment environment) {
        return beanFactory -> ConfiguredNames.checkAll(environment);
    }

    @Bean
    MemoryEventRelays memoryEventRelays() {
        return new MemoryEventRelays();
    }

    /** The budgets of compute.budgets and compute.managers.NAME.budgets, made with their managers. */
    @Bean
    ComputeBudgets computeBudgets() {
        return new ComputeBudgets();
    }

    @Configuration(proxyBeanMethods = false)
    @Conditional(OneManager.class)
    static class SingleManagerConfiguration {

        @Bean(destroyMethod = "close")
        @ConditionalOnMissingBean
        UnifiedMemoryManager unifiedMemoryManager(UnifiedMemoryManagerFactory factory, ComputeProperties properties) {
            return factory.create(properties);
        }
    }

    @Configuration(proxyBeanMethods = false)
    @Conditional(ManagersNamed.class)
    @Import(NamedManagersRegistrar.class)
    static class NamedManagersConfiguration {}

    /** {@code compute.managers} names at least one manager. */
    static final class ManagersNamed extends SpringBootCondition {
        @Override
        public ConditionOutcome getMatchOutcome(ConditionContext context, AnnotatedTypeMetadata metadata) {
            var names = NamedManagers.namesIn(context.getEnvironment());
            return names.isEmpty() ? ConditionOutcome.noMatch("no managers under " + NamedManagers.PREFIX)
                    : ConditionOutcome.match("managers under " + NamedManagers.PREFIX + ": " + names);
        }
    }

    /** No manager is named under {@code compute.managers}: {@code compute.*} describes the one manager. */
    static final class OneManager extends NoneNestedConditions {
        OneManager() {
            super(ConfigurationPhase.PARSE_CONFIGURATION);
        }

        @Conditional(ManagersNamed.class)
        static class Named {}
    }
}
