package dev.compute.memory;

import dev.compute.memory.resource.CachingPoolResource;
import dev.compute.memory.resource.MemoryResource;
import dev.compute.memory.resource.PoolSettings;
import dev.compute.memory.spi.ComputeBackend;

/** Where the manager gets the base of a pooled chain. */
final class ResourceChains {
    private ResourceChains() {}

    static MemoryResource pool(ComputeBackend backend, MemoryLocation location, PoolSettings settings) {
        return new CachingPoolResource(backend, location, settings);
    }
}
