package dev.compute.memory.resource.pool;

import dev.compute.memory.MemoryLocation;
import dev.compute.memory.resource.Block;
import dev.compute.memory.spi.NativeAllocation;
import java.util.BitSet;
import org.jspecify.annotations.Nullable;

/**
 * Memory a pool holds from its backend: a plain allocation, or a reserved virtual range whose pages are
 * mapped on demand ({@code mapped} has one bit per page of {@code granularity} bytes). Its blocks tile it,
 * in address order from {@code first}.
 */
final class PoolSegment {

    final NativeAllocation allocation;
    /** The upstream's block for a plain segment, to give back; null for a range. */
    private final @Nullable Block upstreamBlock;
    final long base;
    final PoolArena arena;
    final @Nullable BitSet mapped;
    final long granularity;
    PoolBlock first;
    /**
     * Where compaction prefers to put blocks, set when a compaction starts: lower first, the fullest segment 0. A
     * segment made since is {@link Integer#MAX_VALUE}, the last place a block would move to.
     */
    int compactionRank = Integer.MAX_VALUE;
    /** Set when the segment is given back (a trim, close): its arena no longer holds it. Under the pool's lock. */
    boolean retired;

    /** A plain allocation from the upstream, given back whole. */
    static PoolSegment plain(Block upstreamBlock, PoolArena arena) {
        return new PoolSegment(upstreamBlock.segment(), upstreamBlock, arena, false, 1);
    }

    /** A reserved range whose pages of {@code granularity} bytes are mapped on demand. */
    static PoolSegment range(NativeAllocation range, PoolArena arena, long granularity) {
        return new PoolSegment(range, null, arena, true, granularity);
    }

    /** An empty segment at no address, for the best-fit set's probe. */
    static PoolSegment nowhere(MemoryLocation location, PoolArena arena) {
        return new PoolSegment(new NativeAllocation(location, Long.MIN_VALUE, 0, null, null), null, arena, false, 1);
    }

    private PoolSegment(NativeAllocation allocation, @Nullable Block upstreamBlock, PoolArena arena, boolean expandable, long granularity) {
        this.allocation = allocation;
        this.upstreamBlock = upstreamBlock;
        this.base = allocation.address();
        this.arena = arena;
        this.granularity = granularity;
        this.mapped = expandable ? new BitSet() : null;
        this.first = new PoolBlock(this, 0, size(), PoolBlock.FREE);
    }

    Block upstreamBlock() {
        if (upstreamBlock == null) {
            throw new IllegalStateException("a reserved range is released, not freed");
        }
        return upstreamBlock;
    }

    boolean expandable() {
        return mapped != null;
    }

    /** The bytes its blocks tile: blocks are whole multiples of the alignment, so the tiled part is too. */
    long size() {
        return allocation.sizeBytes() & -SizeClasses.ALIGNMENT;
    }

    /** Pages of this range, rounded down (a range is a whole number of pages). */
    int pages() {
        return (int) (size() / granularity);
    }
}
