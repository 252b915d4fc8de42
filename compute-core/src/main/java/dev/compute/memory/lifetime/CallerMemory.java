package dev.compute.memory.lifetime;

import dev.compute.memory.internal.LibraryThreads;
import java.lang.foreign.MemorySegment;

/**
 * How long the memory of a segment a caller passes to a copy stays valid, as far as a driver that is handed its
 * address can tell: not at all. Java's own accesses to a segment are safe from its arena's close (a shared arena's
 * close waits for them, or fails them with {@link IllegalStateException}); a driver reading or writing the address
 * is not, and reaches freed memory (on PoCL, the end of the process). So a copy hands the driver the caller's address
 * only where nothing can free it meanwhile, and copies through memory of its own, by Java, everywhere else.
 */
enum CallerMemory {

    /** A Java array: a backend pins it for a blocking call and copies it for a queued one. */
    HEAP,
    /**
     * Memory no arena of this JVM frees: the global arena's, or an address the caller made into a segment itself (a
     * restricted method, which takes the caller's word for the memory).
     */
    FOREVER,
    /** A confined arena of the calling thread: only this thread can close it, so it stays valid for this call. */
    THIS_CALL,
    /** A shared or automatic arena's, or another's: freed at any moment by another thread, or once unreachable. */
    ANY_MOMENT;

    /**
     * Whether a queued copy must take the bytes through memory of its own: the caller may free this memory before the
     * device reaches it (its arena closed by another thread, or by this one once the call returns).
     */
    boolean freeableBeforeAQueuedCopy() {
        return this == THIS_CALL || this == ANY_MOMENT;
    }

    /** A thread that is never started: no confined segment is accessible by it. */
    private static final Thread NO_OWNER = LibraryThreads.neverStarted();

    /**
     * What {@code segment}'s memory is, refusing it as Java's own accesses would: once its arena is closed, and from a
     * thread its confined arena does not belong to.
     */
    static CallerMemory of(MemorySegment segment) {
        if (!segment.scope().isAlive()) {
            throw new IllegalStateException("the segment's arena is closed: " + segment);
        }
        if (!segment.isAccessibleBy(Thread.currentThread())) {
            throw new WrongThreadException("the segment belongs to a confined arena of another thread: " + segment);
        }
        if (!segment.isNative()) {
            return HEAP;
        }
        if (segment.scope().equals(MemorySegment.NULL.scope())) {
            return FOREVER;
        }
        return segment.isAccessibleBy(NO_OWNER) ? ANY_MOMENT : THIS_CALL;
    }
}
