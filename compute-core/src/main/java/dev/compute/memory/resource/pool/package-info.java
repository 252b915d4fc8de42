/**
 * The caching pool's algorithm, kept apart from the resource that uses it (as RMM keeps its pool's details in
 * {@code detail/}): blocks and their neighbour lists, arenas with best fit, splitting, coalescing and page
 * mapping, the size-class cache of the fast path, and the pool's ledger of reserved bytes and backend calls.
 * {@link dev.compute.memory.resource.pool.CachingPoolResource} explains the whole; these types are public only
 * so that it can use them, and are not an API. None of them is thread-safe on its own: the resource guards
 * them with its lock (the size-class cache with one lock per stack: per size class, per thread stripe).
 */
@NullMarked
package dev.compute.memory.resource.pool;

import org.jspecify.annotations.NullMarked;
