package dev.compute.boot;

import dev.compute.memory.UnifiedMemoryManager;
import java.util.Objects;
import org.jspecify.annotations.Nullable;
import org.springframework.beans.factory.BeanClassLoaderAware;
import org.springframework.beans.factory.annotation.AnnotatedBeanDefinition;
import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.beans.factory.config.BeanDefinition;
import org.springframework.beans.factory.support.AutowireCandidateQualifier;
import org.springframework.beans.factory.support.BeanDefinitionRegistry;
import org.springframework.beans.factory.support.RootBeanDefinition;
import org.springframework.context.EnvironmentAware;
import org.springframework.context.annotation.ImportBeanDefinitionRegistrar;
import org.springframework.core.env.Environment;
import org.springframework.core.type.AnnotationMetadata;
import org.springframework.util.ClassUtils;
import org.springframework.util.StringUtils;

/**
 * Registers a {@link UnifiedMemoryManager} bean for each name under {@code compute.managers}: named
 * {@code <name>UnifiedMemoryManager}, qualified by the name ({@code @Qualifier("gpu")}), made by
 * {@link UnifiedMemoryManagerFactory#createNamed}, closed with the context; the primary one (see
 * {@link NamedManagers}) marked primary, unless {@code compute.primary} is unset and the application has a primary
 * manager of its own: the first named manager is primary only by default, and two primaries fail every injection.
 */
final class NamedManagersRegistrar implements ImportBeanDefinitionRegistrar, EnvironmentAware, BeanClassLoaderAware {

    private @Nullable Environment environment;
    private @Nullable ClassLoader classLoader;

    @Override
    public void setEnvironment(Environment environment) {
        this.environment = environment;
    }

    @Override
    public void setBeanClassLoader(ClassLoader classLoader) {
        this.classLoader = classLoader; // the application's (a restart class loader under DevTools), which sees its own types
    }

    @Override
    public void registerBeanDefinitions(AnnotationMetadata importingClassMetadata, BeanDefinitionRegistry registry) {
        Environment environment = Objects.requireNonNull(this.environment, "environment");
        NamedManagers managers = NamedManagers.of(environment);
        // the application's configuration is registered before the auto-configuration that imports this
        boolean primaryByDefault = !StringUtils.hasText(environment.getProperty("compute.primary"));
        boolean applicationsOwnPrimary = primaryByDefault && hasPrimaryManager(registry, classLoader);
        for (String name : managers.names()) {
            RootBeanDefinition definition = new RootBeanDefinition();
            definition.setTargetType(UnifiedMemoryManager.class);
            definition.setFactoryBeanName(ComputeMemoryAutoConfiguration.FACTORY_BEAN);
            definition.setFactoryMethodName("createNamed");
            boolean primary = !applicationsOwnPrimary && name.equals(managers.primary());
            definition.getConstructorArgumentValues().addIndexedArgumentValue(0, name);
            definition.getConstructorArgumentValues().addIndexedArgumentValue(1, primary); // its budgets found by name alone
            definition.setDestroyMethodName("close");
            definition.setPrimary(primary);
            definition.addQualifier(new AutowireCandidateQualifier(Qualifier.class, name));
            registry.registerBeanDefinition(NamedManagers.beanName(name), definition);
        }
    }

    private static boolean hasPrimaryManager(BeanDefinitionRegistry registry, @Nullable ClassLoader classLoader) {
        for (String name : registry.getBeanDefinitionNames()) {
            BeanDefinition definition = registry.getBeanDefinition(name);
            if (definition.isPrimary() && isManager(definition, classLoader)) {
                return true;
            }
        }
        return false;
    }

    /**
     * Whether {@code definition} makes a manager: a {@code @Bean} method's return type, or the bean's own type. A primary
     * one that only a later auto-configuration or a {@code FactoryBean} makes is not seen here: set compute.primary then.
     */
    private static boolean isManager(BeanDefinition definition, @Nullable ClassLoader classLoader) {
        if (definition instanceof AnnotatedBeanDefinition annotated && annotated.getFactoryMethodMetadata() != null) {
            String returned = annotated.getFactoryMethodMetadata().getReturnTypeName();
            return ClassUtils.isPresent(returned, classLoader)
                    && UnifiedMemoryManager.class.isAssignableFrom(ClassUtils.resolveClassName(returned, classLoader));
        }
        Class<?> type = definition.getResolvableType().resolve();
        if (type == null && definition.getBeanClassName() != null && ClassUtils.isPresent(definition.getBeanClassName(), classLoader)) {
            type = ClassUtils.resolveClassName(definition.getBeanClassName(), classLoader); // a scanned @Component, by its name only
        }
        return type != null && UnifiedMemoryManager.class.isAssignableFrom(type);
    }
}
