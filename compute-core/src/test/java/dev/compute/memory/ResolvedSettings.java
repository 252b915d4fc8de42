package dev.compute.memory;

import dev.compute.memory.spi.ComputeBackend;

/**
 * The settings a manager would run with on {@code backend}, resolved by the builder as {@link UnifiedMemoryManagerBuilder#build()}
 * resolves them (checked, the cap resolved, the default location chosen), without building a manager: for the tests of
 * the manager's parts, which take the resolved settings.
 */
public final class ResolvedSettings {

    private ResolvedSettings() {}

    public static ManagerSettings of(UnifiedMemoryManagerBuilder builder, ComputeBackend backend, MemoryLocation defaultLocation) {
        builder.validate();
        String name = backend.info().backend();
        return builder.resolved(name, defaultLocation, builder.maxPoolSizeOn(backend.memoryInfo(), name));
    }

    public static ManagerSettings of(UnifiedMemoryManagerBuilder builder, ComputeBackend backend) {
        return of(builder, backend, backend.defaultLocation());
    }
}
