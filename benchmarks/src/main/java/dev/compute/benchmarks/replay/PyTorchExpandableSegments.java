package dev.compute.benchmarks.replay;

import java.util.Comparator;
import java.util.HashMap;
import java.util.Map;
import java.util.TreeSet;
import org.jspecify.annotations.Nullable;

/**
 * PyTorch's CUDA caching allocator with {@code expandable_segments:True}, as a model a trace replays through, so that
 * any trace's figures can be set beside PyTorch's policy on the same requests (PyTorch's own figures exist for the
 * BERT trace alone, measured on an H100). It follows {@code c10/cuda/CUDACachingAllocator.cpp}:
 * <ul>
 * <li>sizes rounded up to 512 bytes; up to 1 MiB small, the rest large, each kind in a pool of its own per stream;</li>
 * <li>each pool one expandable segment (an address range) mapped in pages of 2 MiB (small) or 20 MiB (large);</li>
 * <li>{@code get_free_block}: the smallest mapped free block that fits, where a free block followed by unmapped pages
 * counts as its size with them, and among those the one that grows least;</li>
 * <li>failing that, {@code try_allocate_expandable_block}: the lowest unmapped range (with the free block before it)
 * that holds the request, its pages mapped for the part the free block lacks, one map call ({@code map_block}) per
 * range mapped, merged with its free neighbours;</li>
 * <li>the block's first {@code size} bytes are used, and a rest of 512 bytes or more stays free ({@code should_split});
 * a free merges with free neighbours ({@code free_block}); nothing is unmapped while no allocation fails.</li>
 * </ul>
 * Reserved bytes are the mapped pages; backend calls are map calls (PyTorch's {@code num_device_alloc}). Limited to a
 * capacity as by {@code set_per_process_memory_fraction}, an allocation that finds no free block is refused where what
 * PyTorch asks for would pass it, and then, as in PyTorch, every free page is unmapped and the allocation tried once
 * more ({@code release_cached_blocks}). Replayed on the BERT trace it gives PyTorch's own figures on the H100: overhead,
 * map calls and the smallest capacity ({@code PyTorchExpandableSegmentsTest}).
 */
public final class PyTorchExpandableSegments {

    static final long MIN_BLOCK = 512;
    static final long SMALL_SIZE = 1L << 20;
    static final long SMALL_PAGE = 2L << 20;
    static final long LARGE_PAGE = 20L << 20;
    /** Large requests under this size ask for a whole large page ({@code kMinLargeAlloc}). */
    static final long MIN_LARGE_ALLOC = 10L << 20;
    /** Address space of one segment: PyTorch reserves 1 1/8 of the device's memory; any size past the trace's works. */
    static final long SEGMENT_SPACE = 1L << 42;

    /**
     * What the replay reserved at its peak and how many map calls it made; and the calls any allocator makes on the trace
     * if it reserves no more than PyTorch at its peak on every prefix of the trace ({@link #replay}).
     */
    public record Figures(long reservedPeak, long mapCalls, long forcedCalls) {}

    private static final class Block {
        final Pool pool;
        final Segment segment;
        long address;
        long size;
        boolean allocated;
        boolean mapped;
        @Nullable Block prev;
        @Nullable Block next;

        Block(Pool pool, Segment segment, long address, long size, boolean mapped) {
            this.pool = pool;
            this.segment = segment;
            this.address = address;
            this.size = size;
            this.mapped = mapped;
        }
    }

    private record Segment(long base, long page) {}

    private static final class Pool {
        final boolean small;
        /** Mapped free blocks by size, then address (PyTorch's {@code BlockPool::blocks}). */
        final TreeSet<Block> free = new TreeSet<>(Comparator.<Block>comparingLong(b -> b.size).thenComparingLong(b -> b.address));
        /** Unmapped ranges by address ({@code BlockPool::unmapped}). */
        final TreeSet<Block> unmapped = new TreeSet<>(Comparator.comparingLong(b -> b.address));

        Pool(boolean small) {
            this.small = small;
        }
    }

    private final Map<Integer, Pool[]> poolsByStream = new HashMap<>();
    private long nextSegmentBase;
    private long reserved;
    private long reservedPeak;
    private long mapCalls;
    /** Allocations after which more bytes are live than PyTorch had reserved at any point before them. */
    private long forcedCalls;
    /** The memory PyTorch may use ({@code set_per_process_memory_fraction} of the device), or no limit. */
    private final long capacity;

    private PyTorchExpandableSegments(long capacity) {
        this.capacity = capacity;
    }

    /** Thrown where PyTorch would raise its out-of-memory error; the replay stops there. */
    private static final class OutOfMemory extends RuntimeException {
        OutOfMemory() {
            super(null, null, false, false);
        }
    }

    /**
     * Replays every event of {@code trace} and returns the peak of mapped bytes, the map calls, and the forced calls: the
     * allocations after which more bytes are live (as asked, unrounded) than PyTorch had reserved at its peak over the
     * events before. Each forces a backend call on any allocator that reserves no more than PyTorch at its peak on every
     * prefix of the trace, whatever its policy: over the prefix that ends before such an allocation it reserved at most
     * PyTorch's peak there, which is less than what is live after the allocation, and no allocator holds less than what
     * it hands out; so its reservation grows during that allocation, which takes a call. An allocator that does not know
     * where a trace ends acts on a prefix as on the whole trace: one that makes fewer calls than these on a trace reserves
     * more than PyTorch at its peak on some prefix of it, a trace cut short there (docs/benchmarks-log.md).
     */
    public static Figures replay(Trace trace) {
        PyTorchExpandableSegments allocator = new PyTorchExpandableSegments(Long.MAX_VALUE);
        allocator.replayAll(trace);
        return new Figures(allocator.reservedPeak, allocator.mapCalls, allocator.forcedCalls);
    }

    /**
     * The smallest capacity in which the whole trace replays, found as the replayer finds ours
     * ({@link TraceReplayer#smallestFitting}); PyTorch limited to it as by {@code set_per_process_memory_fraction}, its
     * out-of-memory path (unmap every free page, retry once) allowed.
     */
    public static long smallestCapacity(Trace trace) {
        return TraceReplayer.smallestFitting(trace.livePeak(), replay(trace).reservedPeak(), Long.MAX_VALUE, capacity -> fits(trace, capacity));
    }

    static boolean fits(Trace trace, long capacity) {
        try {
            new PyTorchExpandableSegments(capacity).replayAll(trace);
            return true;
        } catch (OutOfMemory e) {
            return false;
        }
    }

    private void replayAll(Trace trace) {
        Block[] live = new Block[trace.slotCount()];
        long[] asked = new long[trace.slotCount()];
        long liveBytes = 0;
        int[] slots = trace.slots();
        long[] bytes = trace.bytes();
        int[] streams = trace.columns().streams();
        for (int i = 0; i < slots.length; i++) {
            if (bytes[i] > 0) {
                liveBytes += bytes[i];
                if (liveBytes > reservedPeak) {
                    forcedCalls++;
                }
                asked[slots[i]] = bytes[i];
                live[slots[i]] = malloc(bytes[i], streams[i]);
            } else {
                liveBytes -= asked[slots[i]];
                free(live[slots[i]]);
                live[slots[i]] = null;
            }
        }
    }

    static long roundSize(long bytes) {
        return Math.ceilDiv(Math.max(bytes, 1), MIN_BLOCK) * MIN_BLOCK;
    }

    private Block malloc(long bytes, int stream) {
        long size = roundSize(bytes);
        Pool[] pools = poolsByStream.computeIfAbsent(stream, s -> new Pool[] {new Pool(true), new Pool(false)});
        Pool pool = size <= SMALL_SIZE ? pools[0] : pools[1];
        Block block = freeBlock(pool, size);
        if (block == null) {
            block = allocBlock(pool, size);
        }
        if (block == null) {
            releaseCached();
            block = allocBlock(pool, size);
        }
        if (block == null) {
            throw new OutOfMemory();
        }
        if (block.size - size >= MIN_BLOCK) {
            Block rest = new Block(pool, block.segment, block.address + size, block.size - size, true);
            link(block, rest, block.next);
            block.size = size;
            pool.free.add(rest);
        }
        block.allocated = true;
        return block;
    }

    /** {@code get_free_block}: best fit among mapped free blocks, by what each could grow to. */
    private static @Nullable Block freeBlock(Pool pool, long size) {
        Block fit = pool.free.ceiling(new Block(pool, new Segment(0, 1), -1, size, true));
        if (fit == null) {
            return null;
        }
        for (Block next = pool.free.higher(fit); next != null && expandableSize(next) < expandableSize(fit); next = pool.free.higher(fit)) {
            fit = next;
        }
        pool.free.remove(fit);
        return fit;
    }

    private static long expandableSize(Block block) {
        return block.size + (block.next != null && !block.next.mapped ? block.next.size : 0);
    }

    /**
     * {@code alloc_block}: refused where what PyTorch would ask for ({@code get_allocation_size}: 2 MiB for a small
     * block, 20 MiB for a large one under 10 MiB, else the size rounded up to 2 MiB) would pass the capacity, else
     * {@link #expandableBlock}.
     */
    private @Nullable Block allocBlock(Pool pool, long size) {
        long asked = size <= SMALL_SIZE ? SMALL_PAGE : size < MIN_LARGE_ALLOC ? LARGE_PAGE : Math.ceilDiv(size, SMALL_PAGE) * SMALL_PAGE;
        if (reserved + asked > capacity) {
            return null;
        }
        return expandableBlock(pool, size);
    }

    /** {@code release_cached_blocks}: every free block's whole pages are unmapped ({@code unmap_block}). */
    private void releaseCached() {
        for (Pool[] pools : poolsByStream.values()) {
            for (Pool pool : pools) {
                for (Block block : pool.free.toArray(Block[]::new)) {
                    unmap(block);
                }
            }
        }
    }

    private void unmap(Block block) {
        long page = block.segment.page();
        long offset = block.address - block.segment.base();
        long first = Math.ceilDiv(offset, page);
        long end = (offset + block.size) / page;
        if (first >= end) {
            return;
        }
        Pool pool = block.pool;
        pool.free.remove(block);
        long unmappedStart = block.segment.base() + first * page;
        long unmappedSize = (end - first) * page;
        if (unmappedStart > block.address) {
            Block before = new Block(pool, block.segment, block.address, unmappedStart - block.address, true);
            link(block.prev, before, block);
            pool.free.add(before);
        }
        long afterSize = block.address + block.size - (unmappedStart + unmappedSize);
        if (afterSize > 0) {
            Block after = new Block(pool, block.segment, unmappedStart + unmappedSize, afterSize, true);
            link(block, after, block.next);
            pool.free.add(after);
        }
        block.address = unmappedStart;
        block.size = unmappedSize;
        block.mapped = false;
        reserved -= unmappedSize;
        merge(block, block.prev);
        merge(block, block.next);
        pool.unmapped.add(block);
    }

    /** {@code try_allocate_expandable_block}: maps what the lowest place that can hold the request lacks. */
    private Block expandableBlock(Pool pool, long size) {
        Block candidate = lowestRoom(pool, size);
        if (!candidate.mapped) {
            map(candidate, Math.min(candidate.size, size));
        }
        while (candidate.size < size) {
            Block next = candidate.next;
            map(next, Math.min(size - candidate.size, next.size));
            candidate = next;
        }
        pool.free.remove(candidate);
        return candidate;
    }

    /** {@code find_expandable_block}: the lowest unmapped range, with a free block before it, that holds {@code size}. */
    private Block lowestRoom(Pool pool, long size) {
        for (Block range : pool.unmapped) {
            Block start = range.prev != null && !range.prev.allocated ? range.prev : range;
            long room = 0;
            for (Block b = start; b != null && room < size && !b.allocated; b = b.next) {
                room += b.size;
            }
            if (room >= size) {
                return start;
            }
        }
        Segment segment = new Segment(nextSegmentBase, pool.small ? SMALL_PAGE : LARGE_PAGE);
        nextSegmentBase += SEGMENT_SPACE;
        Block range = new Block(pool, segment, segment.base(), SEGMENT_SPACE, false);
        pool.unmapped.add(range);
        return range;
    }

    /** {@code map_block}: maps the pages under the first {@code size} bytes of an unmapped range, one call. */
    private void map(Block range, long size) {
        long page = range.segment.page();
        long offset = range.address - range.segment.base();
        long mappedSize = (Math.ceilDiv(offset + size, page) - offset / page) * page;
        reserved += mappedSize;
        reservedPeak = Math.max(reservedPeak, reserved);
        mapCalls++;
        Pool pool = range.pool;
        pool.unmapped.remove(range);
        range.mapped = true;
        if (mappedSize < range.size) {
            Block rest = new Block(pool, range.segment, range.address + mappedSize, range.size - mappedSize, false);
            link(range, rest, range.next);
            pool.unmapped.add(rest);
            range.size = mappedSize;
        }
        merge(range, range.prev);
        merge(range, range.next);
        pool.free.add(range);
    }

    private void free(Block block) {
        block.allocated = false;
        merge(block, block.prev);
        merge(block, block.next);
        block.pool.free.add(block);
    }

    /** {@code try_merge_blocks}: {@code into} takes over a free neighbour of the same mapping. */
    private static void merge(Block into, @Nullable Block neighbour) {
        if (neighbour == null || neighbour.allocated || neighbour.mapped != into.mapped) {
            return;
        }
        Pool pool = into.pool;
        TreeSet<Block> home = into.mapped ? pool.free : pool.unmapped;
        boolean listed = home.remove(into);
        home.remove(neighbour);
        if (into.prev == neighbour) {
            into.address = neighbour.address;
            into.prev = neighbour.prev;
            if (into.prev != null) {
                into.prev.next = into;
            }
        } else {
            into.next = neighbour.next;
            if (into.next != null) {
                into.next.prev = into;
            }
        }
        into.size += neighbour.size;
        if (listed) {
            home.add(into);
        }
    }

    private static void link(@Nullable Block before, Block block, @Nullable Block after) {
        block.prev = before;
        block.next = after;
        if (before != null) {
            before.next = block;
        }
        if (after != null) {
            after.prev = block;
        }
    }
}
