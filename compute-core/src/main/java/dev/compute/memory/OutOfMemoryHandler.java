package dev.compute.memory;

/**
 * Given the chance to free memory of its own (evict a cache, drop a batch) when an allocation finds none,
 * in the manner of RMM's {@code failure_callback_resource_adaptor} and cuDF's {@code RmmEventHandler}. Called
 * after the pool has given back what it caches and retried and, with {@code compact-on-out-of-memory} (the default),
 * after a compaction of the location and one more try, on the allocating thread, outside the pool's lock.
 * Return true to ask for one more try (having closed some buffers), false to let the allocation fail. Not called
 * for a request larger than a limit ({@link AllocationAboveLimitException}), which nothing freed could let through.
 *
 * <p>Bounded: an allocation is retried at most {@link UnifiedMemoryManagerBuilder#outOfMemoryRetries} times, and
 * never re-entered: an allocation made inside a handler that fails fails at once, without calling handlers again.
 * A handler that throws fails the allocation with that exception (the out-of-memory one suppressed into it); one
 * that lets out a {@link DeviceOutOfMemoryException} of its own allocation fails it with the allocation's own
 * out-of-memory, the handler's suppressed into it, so that the failure names what was asked.
 */
@FunctionalInterface
public interface OutOfMemoryHandler {

    /**
     * @param location  where memory ran out
     * @param requestedBytes what the allocation asked for
     * @param attempt   1 for the first call on this allocation, 2 for the next, …
     * @param failure   the out-of-memory that the last try met (its message has the pool's figures)
     * @return true to retry the allocation, false to give up
     */
    boolean onOutOfMemory(MemoryLocation location, long requestedBytes, int attempt, DeviceOutOfMemoryException failure);
}
