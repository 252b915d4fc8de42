package dev.compute.memory;

import org.jspecify.annotations.Nullable;

/**
 * Told what happens off the pool's fast path: calls to the backend, allocations that finally fail, recovery
 * from out-of-memory, trims and leaks; for meters, tracing, JFR. A pool hit tells it nothing, so a listener
 * never slows the common allocation. Methods are called on the thread that did the work, some (the backend
 * calls) under the pool's lock: keep them short, and never allocate from a manager, use a buffer or compact a
 * manager inside one (a compaction holds a buffer's lock while it takes the pool's; one started under the pool's lock
 * moves nothing; an allocation from any manager is refused with {@link IllegalStateException} unless the pool's
 * size-class cache serves it at once without a lock, since taking a second pool's lock under the first could deadlock
 * with a thread doing the reverse, and an allocation from a listener of failures would be told to it again without end;
 * a trim gives nothing back, a compaction moves nothing). It may read the statistics: there a pool whose lock another
 * thread holds gives the largest free block it last found. A
 * listener that throws is logged and otherwise ignored. Register with
 * {@link UnifiedMemoryManagerBuilder#eventListener}.
 */
public interface MemoryEventListener {

    /** Listens to nothing. */
    MemoryEventListener NONE = new MemoryEventListener() {};

    /** The backend gave the pool {@code bytes} (a segment allocated, or pages mapped) in {@code nanos}. */
    default void backendAllocated(MemoryLocation location, long bytes, long nanos) {}

    /** The pool gave {@code bytes} back to the backend (a segment freed, or pages unmapped) in {@code nanos}. */
    default void backendFreed(MemoryLocation location, long bytes, long nanos) {}

    /** How an attempt to make room after out-of-memory ended. */
    enum RecoveryOutcome {
        /** The allocation succeeded after the retry. */
        RECOVERED,
        /** The allocation still found no memory. */
        FAILED
    }

    /**
     * An allocation met out-of-memory and the pool, a compaction ({@code compact-on-out-of-memory}) or the
     * {@link OutOfMemoryHandler}s tried to make room: one call per step, also one that declined (handlers that all
     * returned false; a compaction skipped because nothing changed since one made no room); {@code nanos} is how long
     * the step took.
     */
    default void outOfMemoryRecovery(MemoryLocation location, long requestedBytes, RecoveryOutcome outcome, long nanos) {}

    /** An allocation failed for good, with {@link DeviceOutOfMemoryException}. */
    default void allocationFailed(MemoryLocation location, long requestedBytes, OutOfMemoryReason reason) {}

    /** A trim (scheduled or asked for) gave {@code releasedBytes} of cached memory back. */
    default void trimmed(MemoryLocation location, long releasedBytes) {}

    /**
     * A compaction ({@link UnifiedMemoryManager#compact(MemoryLocation)}) ended; what it moved and gave back. Not told of
     * one a listener asked for, which moves nothing.
     */
    default void compacted(CompactionReport report) {}

    /**
     * The pool's segments and blocks were read ({@link UnifiedMemoryManager#snapshot(MemoryLocation)}, the endpoint's view
     * of a location): {@code blocks} blocks in {@code nanos}, in {@code holds} stretches under the pool's lock, the
     * longest {@code longestHoldNanos}. Not told of a read a listener made.
     */
    default void snapshotRead(MemoryLocation location, int blocks, int holds, long longestHoldNanos, long nanos) {}

    /** A buffer was garbage-collected without {@code close()}; its site where leak detection recorded one. */
    default void leakDetected(MemoryLocation location, long bytes, @Nullable String allocationSite) {}
}
