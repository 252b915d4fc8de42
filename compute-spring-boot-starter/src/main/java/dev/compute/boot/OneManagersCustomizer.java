package dev.compute.boot;

import dev.compute.memory.UnifiedMemoryManagerBuilder;
import java.util.Objects;

/** {@link UnifiedMemoryManagerBuilderCustomizer#forManager}: one manager's, by name, which the starter checks at start. */
record OneManagersCustomizer(String managerName, UnifiedMemoryManagerBuilderCustomizer customizer) implements UnifiedMemoryManagerBuilderCustomizer {

    OneManagersCustomizer {
        Objects.requireNonNull(managerName, "managerName");
        Objects.requireNonNull(customizer, "customizer");
    }

    @Override
    public void customize(UnifiedMemoryManagerBuilder builder) {
        customizer.customize(builder);
    }

    @Override
    public boolean appliesTo(String name) {
        return managerName.equals(name);
    }
}
