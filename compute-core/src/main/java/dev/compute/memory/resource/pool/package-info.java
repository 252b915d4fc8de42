/**
 * The caching pool. {@link dev.compute.memory.resource.pool.CachingPoolResource} is the one public type, and its
 * class comment explains the algorithm; its details (as RMM keeps its pool's in {@code detail/}) are package-private:
 * blocks and their neighbour lists, arenas with best fit, splitting, coalescing and page mapping, and the size-class
 * cache of the fast path. None of them is thread-safe on its own: the pool guards them with its lock (the size-class
 * cache with one lock per stack: per size class, per thread stripe).
 */
@NullMarked
package dev.compute.memory.resource.pool;

import org.jspecify.annotations.NullMarked;
