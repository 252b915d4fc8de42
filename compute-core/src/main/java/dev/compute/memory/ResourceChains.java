package dev.compute.memory;

import dev.compute.memory.resource.BackendMemoryResource;
import dev.compute.memory.resource.MemoryResource;
import dev.compute.memory.resource.PoolSettings;
import dev.compute.memory.spi.ComputeBackend;

/** Where the manager gets the base of a pooled chain. */
final class ResourceChains {
    private ResourceChains() {}

    static MemoryResource pool(ComputeBackend backend, MemoryLocation location, PoolSettings settings) {
        // replaced by the caching pool as soon as it lands
        return new BackendMemoryResource(backend, location);
    }
}
