package dev.compute.memory.resource.pool;

import org.jspecify.annotations.Nullable;

/**
 * The fields of a {@link PoolBlock}, laid out so that those written on every allocate and free from the size-class
 * cache ({@code requested}, {@code state}, and {@code stripe} when a block changes threads) share a cache line with
 * nothing another thread uses.
 *
 * <p>Blocks handed to different threads are often neighbours in the heap: a split makes them one after the other,
 * and the garbage collector copies a segment's blocks in list order. Two threads writing neighbouring blocks, or one
 * writing its block beside the segment the other reads, made every allocate and free miss the cache (pairs on two
 * threads several times slower, in some JVMs and not others, as the heap happened to be laid out). So the place
 * fields come first, the written fields start 64 bytes into the object and end in the word 56 bytes before its end:
 * whatever line holds them lies within this object, save the mark word of the object after it. Superclass fields
 * come before subclass fields, which is what fixes the order.
 */
final class PoolBlockFields {

    private PoolBlockFields() {}

    /** Where the block is; written under the pool's lock only (placement, coalescing, compaction). */
    abstract static class Place {
        /** Changes only when compaction moves a live block, under the pool's lock and its user's. */
        PoolSegment home;
        long offset;
        long size;
        @Nullable PoolBlock prev;
        @Nullable PoolBlock next;
    }

    /** Fills the place fields' line, so that the written fields start on the next 64 bytes of the object. */
    @SuppressWarnings("unused")
    abstract static class PaddedPlace extends Place {
        long p0, p1, p2;
    }

    /** Written by the size-class cache's holder on every take and offer ({@code stripe} only when a block changes threads). */
    abstract static class Use extends PaddedPlace {
        long requested;
        byte state;
        /** The cache stripe of the thread that allocated the block, where its free caches it. */
        byte stripe;
    }

    /** Fills the rest of the written fields' line. */
    @SuppressWarnings("unused")
    abstract static class PaddedUse extends Use {
        long q0, q1, q2, q3, q4, q5;
    }
}
