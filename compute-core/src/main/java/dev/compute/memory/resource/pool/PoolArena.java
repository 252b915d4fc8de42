package dev.compute.memory.resource.pool;

import dev.compute.memory.MemorySnapshot;
import dev.compute.memory.resource.BackendResource;
import dev.compute.memory.resource.Block;
import dev.compute.memory.resource.PageMapping;
import dev.compute.memory.spi.NativeAllocation;
import dev.compute.memory.spi.PartialUnmapException;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.Comparator;
import java.util.IdentityHashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import org.jspecify.annotations.Nullable;

/**
 * One half of a pool (small or large blocks): its segments, the best-fit set of its free blocks, splitting,
 * coalescing and, where the backend maps pages, the page map of its reserved ranges. The algorithm is
 * explained in {@link CachingPoolResource}. Not thread-safe: the pool's lock guards it.
 */
final class PoolArena {

    /**
     * Which requests an arena is for; the two never share a segment. A small block lives in the small arena only; a
     * large one may take mapped free space of the small arena (why: {@link CachingPoolResource}, placement).
     */
    enum Kind { SMALL, LARGE }

    /**
     * Whether {@link #take} may map pages for a block (taking the best fit by size), or only hands out a block whose
     * pages are mapped (taking the best fit among the free blocks that need no backend call).
     */
    enum Mapping { MAPPED_ONLY, MAY_MAP }

    /**
     * How much more than asked new memory may be: with slack (a chunk of pages, a 20 MiB segment) so that growth
     * costs few backend calls, or exactly what is needed, under memory pressure.
     */
    enum Growth { WITH_SLACK, EXACT }

    /** Which mapped pages of free space to give back: whole runs, or only as many pages as asked for. */
    private enum Unmapping { WHOLE_RUNS, PAGES_ASKED }

    private static final System.Logger LOG = System.getLogger(PoolArena.class.getName());

    /** Best fit: smallest first, and among equals the lowest address, which keeps blocks packed low. */
    private static final Comparator<PoolBlock> BEST_FIT = (a, b) -> {
        int bySize = Long.compare(a.size, b.size);
        return bySize != 0 ? bySize : Long.compare(a.address(), b.address());
    };

    /**
     * Mapping grows by chunks of 1/8 of what the arena has mapped, 2 to 128 MiB: smaller chunks trade backend calls
     * for a lower reserved peak, larger ones the reverse (the figures: docs/benchmarks-log.md).
     */
    static final int MAP_CHUNK_SHIFT = 3;
    static final long MIN_MAP_CHUNK = 2L << 20;
    static final long MAX_MAP_CHUNK = 128L << 20;

    /**
     * An arena holding at least this many chunks of free whole mapped pages is fragmented rather than growing: a
     * request that fits none of its free space is no sign of more to come, so there a mapping's slack may raise the
     * reserved peak by a chunk shifted right by {@link #SLACK_OVER_PEAK_SHIFT} at most (a quarter of it).
     */
    static final int IDLE_CHUNKS_FOR_FRAGMENTED = 2;
    static final int SLACK_OVER_PEAK_SHIFT = 2;

    /**
     * Before a new peak, at most this many runs of free pages are unmapped, the largest: each is likely mapped again
     * later, one call each, and the largest give most of the bytes (the figures: docs/benchmarks-log.md).
     */
    static final int MAX_RUNS_MOVED = 2;

    /**
     * An arena moves pages only while the runs its moves have unmapped are fewer than this share of the pool's map
     * calls: each unmapped run is likely mapped again later, a call each, and on a trace that creeps from peak to peak
     * the moves would otherwise cost more calls than the peak they hold is worth. The share is where the replayed
     * traces' figures put it (0.155 to 0.18 meet as many; the figures: docs/benchmarks-log.md).
     */
    static final double MOVE_UNMAPS_PER_MAP = 0.175;

    /** Page numbers are ints: a range never has more pages than this. */
    private static final long MAX_RANGE_PAGES = 1L << 30;

    private final Kind kind;
    /** The reservation whose requests this arena serves, apart from everyone else's; null for the shared arenas. */
    private final @Nullable Object reservation;
    private final BackendResource upstream;
    private final CachingPoolResource pool;
    private final @Nullable PageMapping pageMapping;
    private final long granularity;
    private final long rangeBytes;
    private final TreeSet<PoolBlock> free = new TreeSet<>(BEST_FIT);
    private final List<PoolSegment> segments = new ArrayList<>();
    private final PoolBlock probe;
    private long mappedBytes;
    /** Runs this arena's moves have unmapped: the calls spent holding the reserved peak. */
    private long moveUnmaps;
    /** Bytes of this arena's plain segments (kept, not summed, because the pool asks on every small miss). */
    private long plainBytes;
    /**
     * Bytes of the blocks taken and not released yet (live, pending, or kept by the size-class cache): kept, not summed,
     * because the room kept for a reservation and its figures are read on growth and on every statistics read.
     */
    private long takenBytes;

    /**
     * An arena of {@code kind} blocks for {@code pool}, with memory from {@code upstream}, for the requests under
     * {@code reservation} or, where null, everyone else's. With {@code pageMapping} it reserves ranges and maps pages on
     * demand; without, it allocates plain segments.
     */
    PoolArena(Kind kind, @Nullable Object reservation, BackendResource upstream, CachingPoolResource pool, @Nullable PageMapping pageMapping) {
        this.kind = kind;
        this.reservation = reservation;
        this.upstream = upstream;
        this.pool = pool;
        this.pageMapping = pageMapping;
        this.granularity = pageMapping == null ? 1 : pageMapping.granularity();
        if (granularity <= 0 || (pageMapping != null && granularity % SizeClasses.ALIGNMENT != 0)) {
            throw new IllegalArgumentException("page granularity must be a positive multiple of " + SizeClasses.ALIGNMENT + ": " + granularity);
        }
        this.rangeBytes = pageMapping == null ? 0 : rangeBytes(upstream, granularity);
        PoolSegment nowhere = PoolSegment.nowhere(upstream.location(), this);
        this.probe = nowhere.first;
    }

    /**
     * The size of a reserved range: twice what the pool can hold, the cap or the device's memory where that is
     * smaller (why: {@link CachingPoolResource}, where memory comes from).
     */
    private static long rangeBytes(BackendResource upstream, long granularity) {
        long deviceBytes = upstream.memoryInfo().totalBytes();
        long holdable = deviceBytes > 0 ? Math.min(upstream.limitBytes(), deviceBytes) : upstream.limitBytes();
        long largest = MAX_RANGE_PAGES * granularity;
        return SizeClasses.roundUp(Math.clamp(2 * Math.min(holdable, largest / 2), 64 * granularity, largest), granularity);
    }

    /** The pool this arena belongs to. */
    CachingPoolResource pool() {
        return pool;
    }

    boolean expandable() {
        return pageMapping != null;
    }

    // ---- allocation ---------------------------------------------------------------------------------------------

    /**
     * The best-fitting free block of at least {@code size} bytes, split to size and, in a range, with its pages
     * mapped; null when no free block is large enough. Throws {@link dev.compute.memory.DeviceOutOfMemoryException}
     * when pages cannot be mapped (the backend has no memory or the limit is reached); the block is free again then.
     * With {@link Mapping#MAPPED_ONLY}, the smallest free block whose first {@code size} bytes lie on mapped pages,
     * null where there is none.
     */
    @Nullable PoolBlock take(long size, long requested, Mapping mapping, Growth growth) {
        probe.size = size;
        PoolBlock fit = pageMapping != null && mapping == Mapping.MAPPED_ONLY ? smallestBacked() : free.ceiling(probe);
        if (fit == null) {
            return null;
        }
        free.remove(fit);
        PoolBlock block = takenFrom(fit, size, requested);
        if (block.home.expandable()) {
            try {
                mapPagesOf(block, growth);
            } catch (RuntimeException e) {
                release(block);
                throw e;
            }
        }
        return block;
    }

    /**
     * At the cap, where {@link #take} with {@link Mapping#MAPPED_ONLY} found nothing: a block on a run of mapped pages
     * inside a free block of a range whose first bytes are not mapped (a page given back before it, the run on a page
     * shared with a live block, which no trim can give back). The free part before the run stays free. Null where no
     * free block holds such a run; plain segments are mapped whole, so {@link #take} found what they hold.
     */
    @Nullable PoolBlock takeFromAMappedRun(long size, long requested) {
        if (pageMapping == null) {
            return null;
        }
        probe.size = size;
        for (PoolBlock candidate : free.tailSet(probe, true)) {
            long start = mappedRunStart(candidate, size);
            if (start < 0) {
                continue;
            }
            free.remove(candidate);
            PoolBlock run = candidate;
            if (start > candidate.offset) {
                run = split(candidate, start - candidate.offset).next; // the head stays free: back in the set at its new size
                free.add(candidate);
                pool.touched(candidate);
                free.remove(run);
            }
            return takenFrom(run, size, requested);
        }
        return null;
    }

    /** The first {@code size} bytes of {@code fit}, out of the free set already, made a live block for {@code requested} bytes. */
    private PoolBlock takenFrom(PoolBlock fit, long size, long requested) {
        PoolBlock block = split(fit, size);
        block.state = PoolBlock.LIVE;
        block.requested = requested;
        takenBytes += block.size;
        pool.touched(block);
        return block;
    }

    /** Where the first run of mapped pages of a free block in a range that holds {@code size} bytes starts; -1 if none. */
    private static long mappedRunStart(PoolBlock block, long size) {
        PoolSegment segment = block.home;
        if (!segment.expandable()) {
            return -1;
        }
        long g = segment.granularity;
        for (int page = segment.mapped.nextSetBit((int) (block.offset / g)); page >= 0 && page * g < block.end(); ) {
            int end = segment.mapped.nextClearBit(page);
            long start = Math.max(block.offset, page * g);
            if (Math.min(block.end(), end * g) - start >= size) {
                return start;
            }
            page = segment.mapped.nextSetBit(end);
        }
        return -1;
    }

    /**
     * The smallest free block of at least the probe's size whose first that many bytes are mapped. Each block passed
     * over holds an unmapped page where the request would go, and free blocks do not overlap, so few are.
     */
    private @Nullable PoolBlock smallestBacked() {
        for (PoolBlock candidate : free.tailSet(probe, true)) {
            if (backed(candidate, probe.size)) {
                return candidate;
            }
        }
        return null;
    }

    /** Keeps the low {@code size} bytes of a free block and puts the rest back as a free block after it. */
    private PoolBlock split(PoolBlock block, long size) {
        long rest = block.size - size;
        if (rest >= SizeClasses.ALIGNMENT) {
            PoolBlock remainder = new PoolBlock(block.home, block.offset + size, rest, PoolBlock.FREE);
            remainder.prev = block;
            remainder.next = block.next;
            if (block.next != null) {
                block.next.prev = remainder;
            }
            block.next = remainder;
            block.size = size;
            free.add(remainder);
            pool.touched(remainder);
        }
        return block;
    }

    /**
     * Cuts the first {@code size} bytes of a live block off as a live block of its own for {@code requested} bytes, and
     * returns the live rest after it, or null where less than a block is left: how a batch's region becomes its blocks.
     */
    static @Nullable PoolBlock cut(PoolBlock block, long size, long requested) {
        block.requested = requested;
        CachingPoolResource pool = block.arena().pool();
        pool.touched(block);
        long rest = block.size - size;
        if (rest < SizeClasses.ALIGNMENT) {
            return null;
        }
        PoolBlock after = new PoolBlock(block.home, block.offset + size, rest, PoolBlock.LIVE);
        after.prev = block;
        after.next = block.next;
        if (block.next != null) {
            block.next.prev = after;
        }
        block.next = after;
        block.size = size;
        pool.touched(after);
        return after;
    }

    /** Whether the first {@code size} bytes of a block in a range lie on mapped pages. */
    private static boolean backed(PoolBlock block, long size) {
        long g = block.home.granularity;
        return block.home.mapped.nextClearBit((int) (block.offset / g)) >= Math.ceilDiv(block.offset + size, g);
    }

    /**
     * Gets memory for a block of {@code size} bytes that fits nowhere: a plain segment, or a new reserved range
     * (which costs no memory until pages are mapped). Throws {@link dev.compute.memory.DeviceOutOfMemoryException}
     * when the upstream has no memory or its limit would be passed.
     */
    void grow(long size, Growth growth) {
        if (pageMapping != null) {
            NativeAllocation range = pageMapping.reserve(Math.max(rangeBytes, SizeClasses.roundUp(size, granularity)));
            adopt(PoolSegment.range(range, this, granularity));
            return;
        }
        Block segment = upstream.allocate(SizeClasses.segmentSize(size, growth, plainBytes));
        plainBytes += segment.size();
        adopt(PoolSegment.plain(segment, this));
    }

    private void adopt(PoolSegment segment) {
        segments.add(segment);
        free.add(segment.first);
        pool.touched(segment.first);
    }

    /**
     * Maps the pages under a block that are not mapped yet. A page is mapped exactly when a block that is not
     * FREE touches it or it lies in free space that has not been given back; so every page under a new block
     * that is unmapped lies in free space, and the last run may be extended over the free unmapped pages after
     * the block, by a chunk, so that a run of growing requests costs one map call, not one each.
     */
    private void mapPagesOf(PoolBlock block, Growth growth) {
        PoolSegment segment = block.home;
        BitSet mapped = segment.mapped;
        long g = segment.granularity;
        int first = (int) (block.offset / g);
        int end = (int) Math.ceilDiv(block.end(), g);
        if (mapped.nextClearBit(first) >= end) {
            return;
        }
        long need = (end - first - mapped.get(first, end).cardinality()) * g;
        long reserved = upstream.reservedBytes();
        long peak = upstream.reservedBytesPeak();
        boolean moved = false;
        if (growth == Growth.WITH_SLACK && reserved + need > peak && reserved + need - peak > bytesPerMapCall()
                && moveUnmaps < MOVE_UNMAPS_PER_MAP * upstream.backendAllocations()) {
            // a new peak worth a call: move free mapped pages here rather than hold both (unmapping costs calls, not memory)
            try {
                moved = unmapFreePages(reserved + need - peak, Unmapping.WHOLE_RUNS) > 0;
            } catch (RuntimeException refused) {
                // a move saves memory and is not needed: the runs not given back stay free, mapped and counted
                LOG.log(System.Logger.Level.WARNING, "the backend refused to unmap free pages moved to a new peak; "
                        + "the allocation maps new pages beside them", refused);
                moved = upstream.reservedBytes() < reserved;
            }
        }
        int extendTo = end;
        if (growth == Growth.WITH_SLACK && !mapped.get(end - 1)) {
            long chunk = Math.clamp(mappedBytes >> MAP_CHUNK_SHIFT, MIN_MAP_CHUNK, MAX_MAP_CHUNK);
            int runStart = Math.max(first, mapped.previousSetBit(end - 1) + 1);
            int nextMapped = mapped.nextSetBit(end);
            int limit = nextMapped < 0 ? segment.pages() : nextMapped;
            int wanted = (int) Math.min(limit, runStart + Math.ceilDiv(chunk, g));
            // after a move, slack over the peak would raise the peak the move was made to keep
            long ceiling = moved ? Math.max(peak, upstream.reservedBytes() + need) : slackCeiling(need, chunk, (wanted - end) * g);
            while (extendTo < wanted && upstream.fits(need + (extendTo + 1 - end) * g)
                    && upstream.reservedBytes() + need + (extendTo + 1 - end) * g <= ceiling) {
                extendTo++;
            }
        }
        for (int from = mapped.nextClearBit(first); from < extendTo; ) {
            int next = mapped.nextSetBit(from);
            int to = next < 0 || next > extendTo ? extendTo : next;
            map(segment, from, to);
            from = mapped.nextClearBit(to);
        }
    }

    /**
     * The reserved peak over the calls that gave memory so far: what a map call has brought on average. A rise of the
     * peak no larger is not worth a move, whose unmapped pages are likely mapped again later, a call each.
     */
    private long bytesPerMapCall() {
        return upstream.reservedBytesPeak() / Math.max(1, upstream.backendAllocations());
    }

    /**
     * How high what is reserved may go with a mapping of {@code need} bytes and up to {@code slack} more: no limit while
     * the arena grows; in a fragmented arena, {@code chunk >> SLACK_OVER_PEAK_SHIFT} over the reserved peak (the
     * slack would otherwise set the peak beside idle pages, and the next requests will likely fit those).
     */
    private long slackCeiling(long need, long chunk, long slack) {
        long room = upstream.reservedBytesPeak() + (chunk >> SLACK_OVER_PEAK_SHIFT);
        long reserved = upstream.reservedBytes();
        if (reserved + need + slack <= room || !holdsFreeMappedPages(IDLE_CHUNKS_FOR_FRAGMENTED * chunk)) {
            return Long.MAX_VALUE;
        }
        return Math.max(room, reserved + need);
    }

    /** Whether the arena's free blocks hold at least {@code bytes} of whole mapped pages. */
    private boolean holdsFreeMappedPages(long bytes) {
        long found = 0;
        for (Run run : freeMappedRuns()) {
            found += run.pages() * run.segment().granularity;
            if (found >= bytes) {
                return true;
            }
        }
        return false;
    }

    private void map(PoolSegment segment, int fromPage, int toPage) {
        long g = segment.granularity;
        pageMapping().map(segment.allocation, fromPage * g, (toPage - fromPage) * g);
        segment.mapped.set(fromPage, toPage);
        mappedBytes += (toPage - fromPage) * g;
    }

    private void unmap(PoolSegment segment, int fromPage, int toPage) {
        long g = segment.granularity;
        try {
            pageMapping().unmap(segment.allocation, fromPage * g, (toPage - fromPage) * g);
        } catch (PartialUnmapException e) {
            pagesLost(segment, e);
            throw e;
        }
        segment.mapped.clear(fromPage, toPage);
        mappedBytes -= (toPage - fromPage) * g;
    }

    /** Books the pages a failed unmap left unmapped as such: the pool maps them again before it hands them out. */
    private void pagesLost(PoolSegment segment, PartialUnmapException e) {
        for (long offset : e.unmappedOffsets()) {
            int page = (int) (offset / segment.granularity);
            if (segment.mapped.get(page)) {
                segment.mapped.clear(page);
                mappedBytes -= segment.granularity;
            }
        }
    }

    private PageMapping pageMapping() {
        if (pageMapping == null) {
            throw new IllegalStateException("this arena does not map pages");
        }
        return pageMapping;
    }

    // ---- freeing ------------------------------------------------------------------------------------------------

    /** Makes a block free and merges it with free neighbours: one free block per gap between used ones; returns that one. */
    PoolBlock release(PoolBlock block) {
        if (block.state == PoolBlock.LIVE || block.state == PoolBlock.PENDING || block.state == PoolBlock.CACHED) {
            takenBytes -= block.size;
        }
        PoolBlock merged = block;
        merged.state = PoolBlock.FREE;
        merged.requested = 0;
        PoolBlock before = merged.prev;
        if (before != null && before.state == PoolBlock.FREE) {
            free.remove(before);
            before.size += merged.size;
            unlink(merged);
            merged = before;
        }
        PoolBlock after = merged.next;
        if (after != null && after.state == PoolBlock.FREE) {
            free.remove(after);
            merged.size += after.size;
            unlink(after);
        }
        free.add(merged);
        pool.touched(merged);
        return merged;
    }

    /** Marks a live block as waiting for device work: neither reused nor unmapped until {@link #release}. */
    void pend(PoolBlock block) {
        block.state = PoolBlock.PENDING;
        pool.touched(block);
    }

    private static void unlink(PoolBlock block) {
        PoolBlock before = block.prev;
        if (before != null) {
            before.next = block.next;
        }
        if (block.next != null) {
            block.next.prev = before;
        }
        block.prev = null;
        block.next = null;
    }

    /**
     * Gives free memory back to the backend until {@code bytes} are released or nothing more can be: whole
     * free plain segments, and free mapped pages of ranges, largest runs first (fewest calls). Returns the
     * bytes released.
     */
    long releaseCached(long bytes) {
        long released = 0;
        Iterator<PoolSegment> it = segments.iterator();
        while (it.hasNext() && released < bytes) {
            PoolSegment segment = it.next();
            if (!segment.expandable() && segment.first.state == PoolBlock.FREE && segment.first.next == null) {
                free.remove(segment.first);
                boolean givenBack;
                try {
                    givenBack = freePlainSegment(segment);
                } catch (RuntimeException refused) {
                    // the backend kept the segment: it stays the pool's, cached, and a later trim tries again
                    segment.retired = false;
                    free.add(segment.first);
                    throw refused;
                }
                released += givenBack ? segment.size() : 0;
                it.remove();
            }
        }
        if (released < bytes && pageMapping != null) {
            released += unmapFreePages(bytes - released, Unmapping.PAGES_ASKED);
        }
        return released;
    }

    /**
     * Free memory taken out of its arena for a trim to give back without the pool's lock ({@link #takeCached}): a whole
     * plain segment, or the pages {@code [fromPage, toPage)} of a range, as one block in the {@link PoolBlock#RELEASING}
     * state, which no allocation, coalescing or move touches. {@link #settle} puts it back in the arena's books.
     */
    static final class Release {
        private final PoolBlock block;
        private final int fromPage;
        private final int toPage;
        /** Set by a {@link #giveBack} the backend refused part way: the pages it left unmapped, booked at {@link #settle}. */
        private @Nullable PartialUnmapException partial;

        Release(PoolBlock block, int fromPage, int toPage) {
            this.block = block;
            this.fromPage = fromPage;
            this.toPage = toPage;
        }

        PoolBlock block() {
            return block;
        }

        long bytes() {
            PoolSegment segment = block.home;
            return segment.expandable() ? (long) (toPage - fromPage) * segment.granularity : segment.allocation.sizeBytes();
        }

        /**
         * The backend's call, made without the pool's lock; throws where the backend refuses, nothing then given back.
         * False where the backend left a segment's free unfinished: gone from the pool, still reserved until a trim ends it.
         */
        boolean giveBack() {
            PoolSegment segment = block.home;
            PoolArena arena = segment.arena;
            if (segment.expandable()) {
                try {
                    arena.pageMapping().unmap(segment.allocation, fromPage * segment.granularity, bytes());
                } catch (PartialUnmapException e) {
                    partial = e;
                    throw e;
                }
                return true;
            }
            return arena.upstream.deallocateNow(segment.upstreamBlock());
        }
    }

    /**
     * As {@link #releaseCached}, the memory only taken out of the arena, for {@link Release#giveBack} to give back without
     * the pool's lock: whole free plain segments, and runs of free mapped pages, largest first, until {@code bytes}.
     */
    List<Release> takeCached(long bytes) {
        List<Release> taken = new ArrayList<>();
        long bytesTaken = 0;
        for (PoolSegment segment : segments) {
            if (bytesTaken >= bytes) {
                break;
            }
            if (!segment.expandable() && segment.first.state == PoolBlock.FREE && segment.first.next == null) {
                free.remove(segment.first);
                segment.first.state = PoolBlock.RELEASING;
                pool.touched(segment.first);
                Release release = new Release(segment.first, 0, 0);
                taken.add(release);
                bytesTaken += release.bytes();
            }
        }
        if (bytesTaken < bytes && pageMapping != null) {
            List<Run> runs = freeMappedRuns();
            runs.sort(Comparator.comparingInt(Run::pages).reversed());
            for (Run run : runs) {
                if (bytesTaken >= bytes) {
                    break;
                }
                long g = run.segment().granularity;
                long wanted = Math.ceilDiv(bytes - bytesTaken, g);
                int from = wanted >= run.pages() ? run.from() : run.to() - (int) wanted;
                taken.add(new Release(carve(run.segment(), from * g, run.to() * g), from, run.to()));
                bytesTaken += (run.to() - from) * g;
            }
        }
        return taken;
    }

    /** Cuts {@code [from, to)}, which lies in one free block of {@code segment}, out of it as a block of its own, RELEASING. */
    private PoolBlock carve(PoolSegment segment, long from, long to) {
        PoolBlock block = segment.first;
        while (block.end() <= from) { // the runs taken earlier may have split the block the run was found in
            block = block.next;
        }
        free.remove(block);
        if (block.offset < from) {
            PoolBlock front = block;
            block = new PoolBlock(segment, from, front.end() - from, PoolBlock.FREE);
            linkAfter(front, block);
            front.size = from - front.offset;
            free.add(front);
            pool.touched(front);
        }
        if (block.end() > to) {
            PoolBlock rest = new PoolBlock(segment, to, block.end() - to, PoolBlock.FREE);
            linkAfter(block, rest);
            block.size = to - block.offset;
            free.add(rest);
            pool.touched(rest);
        }
        block.state = PoolBlock.RELEASING;
        pool.touched(block);
        return block;
    }

    private static void linkAfter(PoolBlock block, PoolBlock after) {
        after.prev = block;
        after.next = block.next;
        if (block.next != null) {
            block.next.prev = after;
        }
        block.next = after;
    }

    /** Puts memory a trim took back in the books: given back (gone from the arena, or its pages unmapped), or kept, free. */
    void settle(Release release, boolean givenBack) {
        PoolBlock block = release.block();
        PoolSegment segment = block.home;
        if (!segment.expandable()) {
            if (givenBack) {
                segments.remove(segment);
                segment.retired = true;
                plainBytes -= segment.allocation.sizeBytes();
            } else { // the backend kept the segment: it stays the pool's, cached, and a later trim tries again
                block.state = PoolBlock.FREE;
                free.add(block);
                pool.touched(block);
            }
            return;
        }
        if (givenBack) {
            segment.mapped.clear(release.fromPage, release.toPage);
            mappedBytes -= release.bytes();
        } else if (release.partial != null) {
            pagesLost(segment, release.partial);
        }
        release(block);
    }

    /** False where the backend left the free unfinished: the segment is gone from the pool all the same. */
    private boolean freePlainSegment(PoolSegment segment) {
        segment.retired = true;
        boolean givenBack = upstream.deallocateNow(segment.upstreamBlock());
        plainBytes -= segment.allocation.sizeBytes();
        return givenBack;
    }

    private record Run(PoolBlock block, PoolSegment segment, int from, int to) {
        int pages() {
            return to - from;
        }
    }

    /** The runs of mapped pages that lie wholly in free blocks. */
    private List<Run> freeMappedRuns() {
        List<Run> runs = new ArrayList<>();
        for (PoolBlock block : free) {
            PoolSegment segment = block.home;
            if (!segment.expandable()) {
                continue;
            }
            long g = segment.granularity;
            int lo = (int) Math.ceilDiv(block.offset, g);
            int hi = (int) (block.end() / g);
            for (int from = segment.mapped.nextSetBit(lo); from >= 0 && from < hi; ) {
                int to = Math.min(hi, segment.mapped.nextClearBit(from));
                runs.add(new Run(block, segment, from, to));
                from = to < hi ? segment.mapped.nextSetBit(to) : -1;
            }
        }
        return runs;
    }

    /** Unmaps runs of mapped pages that lie wholly in free blocks, largest first, until {@code bytes} are unmapped. */
    private long unmapFreePages(long bytes, Unmapping unmapping) {
        List<Run> runs = freeMappedRuns();
        runs.sort(Comparator.comparingInt(Run::pages).reversed());
        long released = 0;
        int moved = 0;
        for (Run run : runs) {
            if (released >= bytes || (unmapping == Unmapping.WHOLE_RUNS && moved++ == MAX_RUNS_MOVED)) {
                break;
            }
            // a trim takes from the top of a run no more pages than asked for; moving memory to a new peak takes whole
            // runs, since the pages left would likely be unmapped by the next move anyway, one call each
            long g = run.segment().granularity;
            long wanted = Math.ceilDiv(bytes - released, g);
            int from = unmapping == Unmapping.WHOLE_RUNS || wanted >= run.pages() ? run.from() : run.to() - (int) wanted;
            unmap(run.segment(), from, run.to());
            if (unmapping == Unmapping.WHOLE_RUNS) {
                moveUnmaps++;
            }
            pool.touched(run.block());
            released += (run.to() - from) * g;
        }
        return released;
    }

    // ---- compaction ---------------------------------------------------------------------------------------------

    /**
     * Ranks the segments for a compaction (the fullest first: blocks move towards full segments, so that sparse ones
     * empty and can be given back) and returns the live blocks in the order to try moving them: from the last place
     * (the sparsest segment's highest block) to the first. Pending blocks are not among them: device work uses them.
     */
    List<PoolBlock> compactionOrder() {
        List<PoolSegment> byFullness = new ArrayList<>(segments);
        Map<PoolSegment, Long> live = new IdentityHashMap<>();
        for (PoolSegment segment : segments) {
            long bytes = 0;
            for (PoolBlock b = segment.first; b != null; b = b.next) {
                if (b.state != PoolBlock.FREE) {
                    bytes += b.size;
                }
            }
            live.put(segment, bytes);
        }
        byFullness.sort(Comparator.comparingLong((PoolSegment s) -> live.get(s)).reversed().thenComparingLong(s -> s.base));
        List<PoolBlock> order = new ArrayList<>();
        for (int rank = 0; rank < byFullness.size(); rank++) {
            PoolSegment segment = byFullness.get(rank);
            segment.compactionRank = rank;
            for (PoolBlock b = segment.first; b != null; b = b.next) {
                if (b.state == PoolBlock.LIVE) {
                    order.add(b);
                }
            }
        }
        order.sort(PoolArena::compareByPlace);
        return new ArrayList<>(order.reversed());
    }

    /** Places in compaction's order of preference: the segment's rank, then the offset in it. */
    private static int compareByPlace(PoolBlock a, PoolBlock b) {
        int byRank = Integer.compare(a.home.compactionRank, b.home.compactionRank);
        return byRank != 0 ? byRank : Long.compare(a.offset, b.offset);
    }

    /**
     * Takes, for a live block, the first free place in compaction's order that comes before the block's own and holds
     * it whole: one whose pages are mapped, or, in a range, one whose unmapped pages are fewer than the pages the move
     * frees at the block's old place (so that the move, with {@link #completeMove}, lowers what is mapped) and fit the
     * upstream's limit. The place is split to the block's size, its pages mapped, and marked live. Null where there
     * is none, or where mapping its pages fails. A move thus never raises what the pool reserves.
     */
    @Nullable PoolBlock takePlaceBefore(PoolBlock block) {
        probe.size = block.size;
        PoolBlock best = null;
        for (PoolBlock candidate : free.tailSet(probe, true)) {
            if (compareByPlace(candidate, block) < 0 && (best == null || compareByPlace(candidate, best) < 0)
                    && worthMoving(block, candidate)) {
                best = candidate;
            }
        }
        if (best == null) {
            return null;
        }
        free.remove(best);
        PoolBlock place = split(best, block.size);
        place.state = PoolBlock.LIVE;
        place.requested = block.requested;
        takenBytes += place.size;
        pool.touched(place);
        if (place.home.expandable()) {
            try {
                mapPagesOf(place, Growth.EXACT);
            } catch (RuntimeException refused) {
                release(place);
                return null;
            }
        }
        return place;
    }

    /** Whether moving {@code block} to the start of the free block {@code candidate} maps fewer pages than it frees. */
    private boolean worthMoving(PoolBlock block, PoolBlock candidate) {
        PoolSegment segment = candidate.home;
        if (!segment.expandable()) {
            return true;
        }
        long g = segment.granularity;
        int first = (int) (candidate.offset / g);
        int end = (int) Math.ceilDiv(candidate.offset + block.size, g);
        int unmapped = end - first - segment.mapped.get(first, end).cardinality();
        if (unmapped == 0) {
            return true;
        }
        return unmapped < pagesFreedByMoving(block, candidate) && upstream.fits(unmapped * g);
    }

    /**
     * The mapped pages under {@code block} that no other block in use touches, nor the place it would move to: the
     * pages its move leaves wholly free.
     */
    private static int pagesFreedByMoving(PoolBlock block, PoolBlock to) {
        PoolSegment segment = block.home;
        if (!segment.expandable()) {
            return 0;
        }
        long g = segment.granularity;
        int freed = 0;
        for (int page = (int) (block.offset / g); page < Math.ceilDiv(block.end(), g); page++) {
            long from = page * g;
            long until = from + g;
            boolean touched = !segment.mapped.get(page)
                    || (to.home == segment && to.offset < until && to.offset + block.size > from);
            for (PoolBlock b = block.prev; !touched && b != null && b.end() > from; b = b.prev) {
                touched = b.state != PoolBlock.FREE;
            }
            for (PoolBlock b = block.next; !touched && b != null && b.offset < until; b = b.next) {
                touched = b.state != PoolBlock.FREE;
            }
            if (!touched) {
                freed++;
            }
        }
        return freed;
    }

    /**
     * Ends a move: {@code block} takes {@code place}'s segment, offset and neighbours, and its old place becomes
     * free (coalesced). With {@code unmapOldPlace} (the move mapped pages for its new place), the pages of the old
     * place now wholly free are unmapped at once (where the backend takes them back): more than were mapped, whatever a
     * trim would keep. Both are live
     * blocks of one size; the data was copied meanwhile.
     */
    void completeMove(PoolBlock block, PoolBlock place, boolean unmapOldPlace) {
        PoolSegment segment = block.home;
        long oldOffset = block.offset;
        long oldEnd = block.end();
        exchange(block, place);
        pool.touched(block);
        PoolBlock freed = release(place);
        if (unmapOldPlace && segment.expandable()) {
            long g = segment.granularity;
            // pages wholly in the free block that touch the old place
            int from = (int) Math.max(Math.ceilDiv(freed.offset, g), oldOffset / g);
            int to = (int) Math.min(freed.end() / g, Math.ceilDiv(oldEnd, g));
            try {
                for (int page = segment.mapped.nextSetBit(from); page >= 0 && page < to; ) {
                    int runEnd = Math.min(to, segment.mapped.nextClearBit(page));
                    unmap(segment, page, runEnd);
                    page = runEnd < to ? segment.mapped.nextSetBit(runEnd) : -1;
                }
            } catch (RuntimeException refused) {
                // the move is done and its books right; the pages not given back stay free, mapped and counted
                LOG.log(System.Logger.Level.WARNING, "the backend refused to unmap the old place of a block moved by a "
                        + "compaction; its pages stay cached until a trim", refused);
            }
        }
    }

    /** Swaps the places of two blocks of one size that are not in the free set: each takes the other's segment, offset and neighbours. */
    private static void exchange(PoolBlock a, PoolBlock b) {
        if (b.next == a) {
            PoolBlock swap = a;
            a = b;
            b = swap;
        }
        PoolSegment homeOfA = a.home;
        PoolSegment homeOfB = b.home;
        long offsetOfA = a.offset;
        long offsetOfB = b.offset;
        if (a.next == b) {
            PoolBlock before = a.prev;
            PoolBlock after = b.next;
            b.prev = before;
            b.next = a;
            a.prev = b;
            a.next = after;
            if (before != null) {
                before.next = b;
            } else {
                homeOfA.first = b;
            }
            if (after != null) {
                after.prev = a;
            }
        } else {
            PoolBlock beforeA = a.prev;
            PoolBlock afterA = a.next;
            PoolBlock beforeB = b.prev;
            PoolBlock afterB = b.next;
            a.prev = beforeB;
            a.next = afterB;
            b.prev = beforeA;
            b.next = afterA;
            if (beforeA != null) {
                beforeA.next = b;
            } else {
                homeOfA.first = b;
            }
            if (afterA != null) {
                afterA.prev = b;
            }
            if (beforeB != null) {
                beforeB.next = a;
            } else {
                homeOfB.first = a;
            }
            if (afterB != null) {
                afterB.prev = a;
            }
        }
        a.home = homeOfB;
        a.offset = offsetOfB;
        b.home = homeOfA;
        b.offset = offsetOfA;
    }

    // ---- figures ------------------------------------------------------------------------------------------------

    /** Bytes this arena holds from the backend: its mapped pages and plain segments. */
    long reservedBytes() {
        return mappedBytes + plainBytes;
    }

    @Nullable Object reservation() {
        return reservation;
    }

    /** Bytes of blocks handed out, pending or cached by the size-class cache. */
    long takenBytes() {
        return takenBytes;
    }

    /**
     * The largest piece of free memory that is backed (reusable without a backend call), blocks held by the
     * size-class cache aside (the pool adds those). Free blocks are visited largest first, and only while one
     * could still hold a larger piece: with plain segments that is the first; in a range, the few whose pages are
     * partly unmapped.
     */
    long largestFreeBlock() {
        long largest = 0;
        for (PoolBlock b : free.descendingSet()) {
            if (b.size <= largest) {
                break;
            }
            largest = Math.max(largest, largestBackedPiece(b));
        }
        return largest;
    }

    private static long largestBackedPiece(PoolBlock block) {
        PoolSegment segment = block.home;
        if (!segment.expandable()) {
            return block.size;
        }
        long g = segment.granularity;
        long largest = 0;
        for (int page = segment.mapped.nextSetBit((int) (block.offset / g)); page >= 0 && page * g < block.end(); ) {
            int end = segment.mapped.nextClearBit(page);
            largest = Math.max(largest, Math.min(block.end(), end * g) - Math.max(block.offset, page * g));
            page = segment.mapped.nextSetBit(end);
        }
        return largest;
    }

    /**
     * One snapshot segment per segment or range; its blocks tile it, free space split into mapped and not, blocks
     * the size-class cache holds shown as free. The cache moves blocks between live and cached under its own
     * locks, not the pool's: a block it moves while the walk runs shows as it was before or after.
     */
    void snapshot(List<MemorySnapshot.Segment> into) {
        for (PoolSegment segment : segments) {
            List<MemorySnapshot.Block> blocks = new ArrayList<>();
            Pieces sink = (offset, size, state, requested) -> blocks.add(new MemorySnapshot.Block(offset, size, state, requested, null));
            for (PoolBlock b = segment.first; b != null; b = b.next) {
                describe(b, sink);
            }
            into.add(new MemorySnapshot.Segment(segment.base, segment.size(), segment.expandable(), blocks));
        }
    }

    /** Adds this arena's segments and ranges, in the order {@link #snapshot} lists them. */
    void segmentsInto(List<PoolSegment> into) {
        into.addAll(segments);
    }

    /** Where {@link #describe} puts the pieces of a block. */
    @FunctionalInterface
    interface Pieces {
        void piece(long offset, long size, MemorySnapshot.BlockState state, long requested);
    }

    /** A block as the snapshot shows it: live, pending or releasing as it is; free or cached as its FREE (backed) and UNMAPPED pieces. */
    static void describe(PoolBlock b, Pieces into) {
        switch (b.state) {
            case PoolBlock.LIVE -> into.piece(b.offset, b.size, MemorySnapshot.BlockState.LIVE, b.requested);
            case PoolBlock.PENDING -> into.piece(b.offset, b.size, MemorySnapshot.BlockState.PENDING, b.requested);
            case PoolBlock.RELEASING -> into.piece(b.offset, b.size, MemorySnapshot.BlockState.RELEASING, 0);
            default -> freePieces(b, into);
        }
    }

    /** Whether a block is in its segment's list (not merged into a neighbour since). */
    static boolean linked(PoolBlock b) {
        return b.prev == null ? b.home.first == b : b.prev.next == b;
    }

    /** A free block as FREE (backed) and UNMAPPED pieces, by its pages. */
    private static void freePieces(PoolBlock block, Pieces into) {
        PoolSegment segment = block.home;
        if (!segment.expandable()) {
            into.piece(block.offset, block.size, MemorySnapshot.BlockState.FREE, 0);
            return;
        }
        long g = segment.granularity;
        long at = block.offset;
        while (at < block.end()) {
            int page = (int) (at / g);
            boolean backed = segment.mapped.get(page);
            int nextPage = backed ? segment.mapped.nextClearBit(page) : segment.mapped.nextSetBit(page);
            long until = nextPage < 0 ? block.end() : Math.min(block.end(), nextPage * g);
            into.piece(at, until - at, backed ? MemorySnapshot.BlockState.FREE : MemorySnapshot.BlockState.UNMAPPED, 0);
            at = until;
        }
    }

    // ---- closing ------------------------------------------------------------------------------------------------

    /** Gives every segment and range back, whatever is in them; the first failure is thrown after trying all. */
    void close() {
        RuntimeException failure = null;
        for (PoolSegment segment : segments) {
            segment.retired = true;
            try {
                if (segment.expandable()) {
                    for (int from = segment.mapped.nextSetBit(0); from >= 0; from = segment.mapped.nextSetBit(from)) {
                        int to = segment.mapped.nextClearBit(from);
                        unmap(segment, from, to);
                    }
                    pageMapping().release(segment.allocation);
                } else {
                    freePlainSegment(segment);
                }
            } catch (RuntimeException e) {
                if (failure == null) {
                    failure = e;
                } else {
                    failure.addSuppressed(e);
                }
            }
        }
        segments.clear();
        free.clear();
        if (failure != null) {
            throw failure;
        }
    }

    @Override
    public String toString() {
        return (kind == Kind.SMALL ? "small" : "large") + (reservation != null ? " arena for a reservation, of " : " arena of ") + segments.size() + (expandable() ? " ranges" : " segments");
    }
}
