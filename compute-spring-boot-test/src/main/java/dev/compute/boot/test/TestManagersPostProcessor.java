package dev.compute.boot.test;

import dev.compute.boot.ComputeMemoryAutoConfiguration;
import dev.compute.boot.UnifiedMemoryManagerFactory;
import dev.compute.boot.actuate.ObservedManagers;
import dev.compute.boot.test.AutoConfigureComputeMemory.Replace;
import dev.compute.memory.UnifiedMemoryManager;
import java.lang.annotation.Annotation;
import java.lang.reflect.Method;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import org.jspecify.annotations.Nullable;
import org.springframework.beans.factory.annotation.AnnotatedBeanDefinition;
import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.beans.factory.config.BeanDefinition;
import org.springframework.beans.factory.config.ConfigurableListableBeanFactory;
import org.springframework.beans.factory.support.AbstractBeanDefinition;
import org.springframework.beans.factory.support.AutowireCandidateQualifier;
import org.springframework.beans.factory.support.BeanDefinitionRegistry;
import org.springframework.beans.factory.support.BeanDefinitionRegistryPostProcessor;
import org.springframework.beans.factory.support.RootBeanDefinition;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.boot.test.context.PropertyMapping;
import org.springframework.context.EnvironmentAware;
import org.springframework.core.Ordered;
import org.springframework.core.annotation.MergedAnnotation;
import org.springframework.core.annotation.MergedAnnotations;
import org.springframework.core.env.ConfigurableEnvironment;
import org.springframework.core.env.Environment;
import org.springframework.core.env.MapPropertySource;
import org.springframework.core.type.MethodMetadata;

/**
 * Puts a test's manager in place of each {@link UnifiedMemoryManager} bean that {@link AutoConfigureComputeMemory#replace()}
 * names, as Spring Boot's test support puts an embedded database in place of a {@code DataSource}: same bean name,
 * qualifier and primary flag, built by the starter's {@link UnifiedMemoryManagerFactory#createFrom} from
 * {@code spring.test.compute.*} alone, closed with the context. It runs after the configuration classes have
 * registered every bean, the starter's named managers and the application's own among them.
 */
final class TestManagersPostProcessor implements BeanDefinitionRegistryPostProcessor, EnvironmentAware, Ordered {

    /** The property source of {@link #attributeDefaults()}, as a failure's origins name it. */
    static final String DEFAULTS = "@AutoConfigureComputeMemory defaults";

    private @Nullable Environment environment;

    @Override
    public void setEnvironment(Environment environment) {
        this.environment = environment;
    }

    @Override
    public void postProcessBeanDefinitionRegistry(BeanDefinitionRegistry registry) {
        if (environment instanceof ConfigurableEnvironment configurable && !configurable.getPropertySources().contains(DEFAULTS)) {
            configurable.getPropertySources().addLast(attributeDefaults()); // read as the test's managers are made, after this
        }
        Replace replace = Binder.get(Objects.requireNonNull(environment, "environment"))
                .bind(AutoConfigureComputeMemory.PREFIX + ".replace", Replace.class).orElse(Replace.ANY);
        // no factory: the starter is off (compute.enabled=false), so there is nothing to replace and nothing to build with
        if (replace == Replace.NONE || !registry.containsBeanDefinition(ComputeMemoryAutoConfiguration.FACTORY_BEAN)
                || !(registry instanceof ConfigurableListableBeanFactory beans)) {
            return;
        }
        String[] managers = beans.getBeanNamesForType(UnifiedMemoryManager.class, true, false);
        for (String beanName : managers) {
            BeanDefinition existing = registry.getBeanDefinition(beanName);
            if (replace == Replace.AUTO_CONFIGURED && !isTheStarters(existing)) {
                continue;
            }
            registry.removeBeanDefinition(beanName);
            registry.registerBeanDefinition(beanName, testManager(ObservedManagers.nameOf(beanName), existing,
                    existing.isPrimary() || managers.length == 1));
        }
    }

    /**
     * The defaults of {@link AutoConfigureComputeMemory}'s attributes under their {@code spring.test.compute.*} keys. The
     * attributes map only values given on the annotation (Spring Boot puts those above every property source), so these
     * go below all of them: the test's properties, and a test {@code application.yml}, set those keys as any other.
     */
    static MapPropertySource attributeDefaults() {
        Map<String, Object> defaults = new LinkedHashMap<>();
        for (Method attribute : AutoConfigureComputeMemory.class.getDeclaredMethods()) {
            PropertyMapping mapping = attribute.getAnnotation(PropertyMapping.class);
            String key = mapping == null || mapping.value().isEmpty() ? attribute.getName() : mapping.value();
            defaults.put(AutoConfigureComputeMemory.PREFIX + "." + key, String.valueOf(attribute.getDefaultValue()));
        }
        return new MapPropertySource(DEFAULTS, defaults);
    }

    private static RootBeanDefinition testManager(String name, BeanDefinition existing, boolean primary) {
        RootBeanDefinition definition = new RootBeanDefinition();
        definition.setTargetType(UnifiedMemoryManager.class);
        definition.setFactoryBeanName(ComputeMemoryAutoConfiguration.FACTORY_BEAN);
        definition.setFactoryMethodName("createFrom");
        definition.getConstructorArgumentValues().addIndexedArgumentValue(0, name);
        definition.getConstructorArgumentValues().addIndexedArgumentValue(1, AutoConfigureComputeMemory.PREFIX);
        definition.getConstructorArgumentValues().addIndexedArgumentValue(2, primary); // spring.test.compute.budgets by name alone
        // every other key under spring.test.compute is a setting: a misspelt one stops the context naming it
        definition.getConstructorArgumentValues().addIndexedArgumentValue(3, List.of(AutoConfigureComputeMemory.PREFIX + ".replace"));
        definition.setDestroyMethodName("close");
        definition.setPrimary(existing.isPrimary());
        if (existing instanceof AbstractBeanDefinition registered) {
            definition.copyQualifiersFrom(registered); // compute.managers.<name>: @Qualifier("<name>")
            // how an application's @Bean is injected beside its primary flag: @Fallback, @Bean(defaultCandidate = false)
            definition.setFallback(registered.isFallback());
            definition.setDefaultCandidate(registered.isDefaultCandidate());
            definition.setAutowireCandidate(registered.isAutowireCandidate());
        }
        MethodMetadata factoryMethod = existing instanceof AnnotatedBeanDefinition annotated ? annotated.getFactoryMethodMetadata() : null;
        if (factoryMethod != null) { // an application's @Bean @Qualifier("..."), or a qualifier annotation of its own (@Gpu)
            factoryMethod.getAnnotations().stream().filter(annotation -> annotation.isDirectlyPresent() && isQualifier(annotation.getType()))
                    .forEach(annotation -> definition.addQualifier(qualifier(annotation)));
        }
        return definition;
    }

    private static boolean isQualifier(Class<? extends Annotation> type) {
        return type == Qualifier.class || MergedAnnotations.from(type).isPresent(Qualifier.class);
    }

    // with its attributes, which an injection point's annotation must match (@Qualifier's value, @Device(index = 1))
    private static AutowireCandidateQualifier qualifier(MergedAnnotation<? extends Annotation> annotation) {
        AutowireCandidateQualifier qualifier = new AutowireCandidateQualifier(annotation.getType());
        annotation.asMap().forEach(qualifier::setAttribute);
        return qualifier;
    }

    // the one manager of compute.* (a @Bean of the starter's configuration) or one of compute.managers (made by its factory)
    private static boolean isTheStarters(BeanDefinition definition) {
        String factoryBean = definition.getFactoryBeanName();
        return factoryBean != null && (factoryBean.equals(ComputeMemoryAutoConfiguration.FACTORY_BEAN)
                || factoryBean.startsWith(ComputeMemoryAutoConfiguration.class.getName()));
    }

    @Override
    public int getOrder() {
        return Ordered.LOWEST_PRECEDENCE;
    }
}
