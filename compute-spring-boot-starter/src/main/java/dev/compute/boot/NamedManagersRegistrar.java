package dev.compute.boot;

import dev.compute.memory.UnifiedMemoryManager;
import java.util.Objects;
import org.jspecify.annotations.Nullable;
import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.beans.factory.support.AutowireCandidateQualifier;
import org.springframework.beans.factory.support.BeanDefinitionRegistry;
import org.springframework.beans.factory.support.RootBeanDefinition;
import org.springframework.context.EnvironmentAware;
import org.springframework.context.annotation.ImportBeanDefinitionRegistrar;
import org.springframework.core.env.Environment;
import org.springframework.core.type.AnnotationMetadata;

/**
 * Registers a {@link UnifiedMemoryManager} bean for each name under {@code compute.managers}: named
 * {@code <name>UnifiedMemoryManager}, qualified by the name ({@code @Qualifier("gpu")}), made by
 * {@link UnifiedMemoryManagerFactory#createNamed}, closed with the context; the primary one (see
 * {@link NamedManagers}) marked primary.
 */
final class NamedManagersRegistrar implements ImportBeanDefinitionRegistrar, EnvironmentAware {

    private @Nullable Environment environment;

    @Override
    public void setEnvironment(Environment environment) {
        this.environment = environment;
    }

    @Override
    public void registerBeanDefinitions(AnnotationMetadata importingClassMetadata, BeanDefinitionRegistry registry) {
        NamedManagers managers = NamedManagers.of(Objects.requireNonNull(environment, "environment"));
        for (String name : managers.names()) {
            RootBeanDefinition definition = new RootBeanDefinition();
            definition.setTargetType(UnifiedMemoryManager.class);
            definition.setFactoryBeanName(ComputeMemoryAutoConfiguration.FACTORY_BEAN);
            definition.setFactoryMethodName("createNamed");
            definition.getConstructorArgumentValues().addIndexedArgumentValue(0, name);
            definition.setDestroyMethodName("close");
            definition.setPrimary(name.equals(managers.primary()));
            definition.addQualifier(new AutowireCandidateQualifier(Qualifier.class, name));
            registry.registerBeanDefinition(NamedManagers.beanName(name), definition);
        }
    }
}
