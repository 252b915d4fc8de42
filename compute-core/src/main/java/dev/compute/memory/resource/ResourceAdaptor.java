package dev.compute.memory.resource;

import dev.compute.memory.MemoryLocation;

/**
 * Wraps a location's resource in one of the application's own (a {@link LimitingResource}, a logging or
 * tracing adaptor), as RMM's adaptors wrap an upstream. Given to
 * {@link dev.compute.memory.UnifiedMemoryManagerBuilder#resourceAdaptor}; the manager calls it once per location
 * at start (a null return stops the start) and closes what it returns, which should close {@code upstream} in turn;
 * the manager then frees the pool's memory itself, so an adaptor that does not, or throws, keeps none of it. Each
 * block an adaptor hands out is checked before a buffer uses it: one smaller than asked, or outside its segment, goes
 * back and fails the allocation with an {@link IllegalStateException}.
 */
@FunctionalInterface
public interface ResourceAdaptor {

    MemoryResource wrap(MemoryResource upstream, MemoryLocation location);
}
