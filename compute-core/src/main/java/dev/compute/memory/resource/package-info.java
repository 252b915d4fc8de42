/**
 * Composable allocators in the manner of RAPIDS RMM: the small {@link dev.compute.memory.resource.MemoryResource}
 * contract (allocate, deallocate, close), {@link dev.compute.memory.resource.InspectableResource} for what a
 * resource holding memory can report and give back, {@link dev.compute.memory.resource.BackendResource} at the
 * bottom of every chain (the backend, the cap, the out-of-memory message), and one adaptor a file: statistics, a
 * limit, a callback on out-of-memory. The caching pool is in {@code resource.pool}. The manager builds one chain per
 * location; an application composes into it through the builder ({@link dev.compute.memory.resource.ResourceAdaptor}).
 */
@NullMarked
package dev.compute.memory.resource;

import org.jspecify.annotations.NullMarked;
