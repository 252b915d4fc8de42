package dev.compute.boot;

import dev.compute.memory.UnifiedMemoryManagerBuilder;

/**
 * Changes the builder of a manager the starter builds, after the {@code compute.*} properties were applied and
 * before it is built: a {@link dev.compute.memory.resource.ResourceAdaptor} of your own, a
 * {@link dev.compute.memory.MemoryEventListener}, a setting the properties do not have. Beans of this type are
 * applied in their {@link org.springframework.core.annotation.Order order} to every manager the starter builds;
 * {@link #forManager} keeps one to a single named manager, as resilience4j's customizers do.
 */
@FunctionalInterface
public interface UnifiedMemoryManagerBuilderCustomizer {

    void customize(UnifiedMemoryManagerBuilder builder);

    /**
     * Whether this customizer applies to the manager of this name: the name under {@code compute.managers}, or
     * {@code default} for the one manager of {@code compute.*}. All of them unless overridden.
     */
    default boolean appliesTo(String managerName) {
        return true;
    }

    /**
     * A customizer for the manager {@code managerName} only. A name that is none of the starter's managers (a typo)
     * stops start-up, rather than customize nothing.
     */
    static UnifiedMemoryManagerBuilderCustomizer forManager(String managerName, UnifiedMemoryManagerBuilderCustomizer customizer) {
        return new OneManagersCustomizer(managerName, customizer);
    }
}
