package dev.compute.memory.resource.pool;

import dev.compute.memory.resource.Block;
import dev.compute.memory.spi.NativeAllocation;

/**
 * One block of a pool segment: a node of the segment's address-ordered list (so coalescing finds its
 * neighbours in O(1)) and, while free, an entry of its arena's best-fit set. Eight fields, padded to 128 bytes with
 * compressed oops so that threads using neighbouring blocks do not share cache lines ({@link PoolBlockFields}).
 * Identity equality.
 */
final class PoolBlock extends PoolBlockFields.PaddedUse implements Block {

    /** Handed out. */
    static final byte LIVE = 0;
    /** Free, in the arena's best-fit set, coalesced with its neighbours. */
    static final byte FREE = 1;
    /** Free, held by the size-class cache for a quick reuse; not coalesced until the cache is flushed. */
    static final byte CACHED = 2;
    /** Freed while device work on it was in flight; not reusable until that completes. */
    static final byte PENDING = 3;
    /** Free, taken out of the arena while a trim gives its memory (a plain segment, or mapped pages) back without the pool's lock. */
    static final byte RELEASING = 4;

    PoolBlock(PoolSegment home, long offset, long size, byte state) {
        this.home = home;
        this.offset = offset;
        this.size = size;
        this.state = state;
    }

    @Override
    public NativeAllocation segment() {
        return home.allocation;
    }

    @Override
    public long offset() {
        return offset;
    }

    @Override
    public long size() {
        return size;
    }

    @Override
    public long requestedSize() {
        return requested;
    }

    byte state() {
        return state;
    }

    /** True when this block was carved by {@code pool}. */
    boolean ownedBy(CachingPoolResource pool) {
        return home.arena.pool() == pool;
    }

    /** The arena this block belongs to. */
    PoolArena arena() {
        return home.arena;
    }

    long address() {
        return home.base + offset;
    }

    long end() {
        return offset + size;
    }

    /** Marks a cached block live again for a new request of {@code requestedBytes}. */
    void reuse(long requestedBytes) {
        requested = requestedBytes;
        state = LIVE;
    }

    @Override
    public String toString() {
        return "block of " + size + " bytes at offset " + offset + " of segment 0x" + Long.toHexString(home.base);
    }
}
