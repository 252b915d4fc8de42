package dev.compute.memory.resource.pool;

import dev.compute.memory.internal.SafeEventListener;
import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.MemoryEventListener;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemorySnapshot;
import dev.compute.memory.OutOfMemoryReason;
import dev.compute.memory.internal.StripedLongs;
import dev.compute.memory.internal.UserCode;
import dev.compute.memory.resource.BackendResource;
import dev.compute.memory.resource.Block;
import dev.compute.memory.resource.DeviceWork;
import dev.compute.memory.resource.InspectableResource;
import dev.compute.memory.resource.MemoryResource;
import dev.compute.memory.resource.PageMapping;
import dev.compute.memory.resource.PoolSettings;
import dev.compute.memory.spi.QueuedWorkTimeoutException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.IntToLongFunction;
import java.util.function.LongSupplier;
import java.util.function.ToLongFunction;
import org.jspecify.annotations.Nullable;

/**
 * The caching pool: hands out blocks carved from memory it keeps from its upstream (the location's
 * {@link BackendResource}, which calls the backend and holds the cap), so that after warm-up an allocation is
 * no backend call at all. How it works, part by part.
 *
 * <p><b>Size rounding.</b> A request is rounded up to a multiple of 512 bytes. Up to 1 MiB it is small,
 * beyond large; the two kinds have separate arenas so that short-lived small blocks never split the
 * large free spaces that big tensors need. A large block may still take free space of the small arena
 * (placement, below); a small block takes the large arena's only at the cap (pressure, below).
 *
 * <p><b>Best fit, splitting, coalescing.</b> Each arena keeps its free blocks in a set ordered by size, then
 * address. A request takes the smallest free block that is large enough (the lowest such, among equals),
 * keeps its first {@code size} bytes and puts the rest back as a free block of its own (splitting). Blocks
 * of a segment form an address-ordered list; a freed block merges with a free neighbour on either side
 * (coalescing), so a gap between used blocks is always one free block, as large as it can be.
 *
 * <p><b>Where memory comes from.</b> Where the backend maps pages ({@link BackendResource#pageMapping()}) and
 * the settings ask for {@link PoolSettings.Layout#EXPANDABLE_SEGMENTS}, each arena reserves one large address range and backs
 * only the pages that blocks touch. A range is twice what the pool can hold (the cap, or the device's total
 * memory where that is smaller), so that holes left by live blocks never force a second one; it costs address
 * space, not memory, but address space is bounded too (128 TiB per process on x86-64), and a range sized by a
 * cap of 100 TB could not be reserved at all. A request larger than a range gets a range of its own. A page is mapped exactly
 * when a block in use touches it, or it lies in free space not yet given back; so what the pool reserves
 * follows what is live, page by page, however the address space fragments.
 *
 * <p><b>Placement: mapped free space first.</b> Where pages are mapped on demand, best fit looks first among free
 * blocks whose pages (those the request would use) are mapped: the smallest such, even where a smaller free block
 * has unmapped pages. Failing that, a large request takes mapped free space of the small arena, which small blocks
 * freed after a burst leave behind and which the large arena would otherwise map anew beside it. Only then does
 * the best fit by size get its missing pages mapped. So pages are mapped only when no mapped free space the block
 * may take fits it (blocks held by the fast path's cache aside, below): the reserved peak stays near what the live
 * blocks and the gaps between them need, and no call maps memory beside mapped pages that sit idle.
 *
 * <p><b>Mapping.</b> A block needing unmapped pages
 * maps them in one call, its last run extended by a chunk (1/8 of what the arena has mapped, 2 to 128 MiB) so
 * that growth costs few calls. Before a new mapping would raise the reserved peak by more than a map call has
 * brought on average (the reserved peak over the calls that gave memory), free mapped pages elsewhere in the arena
 * are unmapped first: the memory moves to where it is needed instead of being held twice. A smaller rise is not
 * worth a move, whose pages are likely mapped again later, a call each. A move takes the two largest runs of free
 * pages at most, for the same reason (the largest give most of the bytes), and the mapping after it takes no slack
 * over the reserved peak: slack there would raise the peak the move was made to keep. An arena moves pages only
 * while the runs its moves have unmapped are fewer than 0.175 of the pool's map calls: on a trace that creeps from
 * peak to peak, each move unmaps a run or two that the next requests map again, and the moves would otherwise cost
 * more calls than the peak they hold is worth. The chunk is for growth: an arena that holds two chunks or more of
 * free whole mapped pages is fragmented rather than growing (the request
 * fitted none of its free space), and there the chunk may raise the reserved peak by a quarter of a chunk at most. Why chunks, and not the next 20 MiB page as
 * PyTorch maps: on a climb (blocks allocated and none freed) no policy makes fewer calls than one a page without
 * reserving more at some point of the climb, and none reserves no more at every point without calling as often; chunks
 * trade the slack at a climb's end for a few calls a doubling (the argument and the figures: docs/benchmarks-log.md). Without
 * page mapping the pool allocates plain segments: for small blocks, ones that grow with the arena from 256 KiB to
 * 2 MiB (at most 1/32 of what it holds, so that the last one's unused tail stays small); 20 MiB ones for large
 * requests under 10 MiB, and the request rounded up to 2 MiB beyond.
 *
 * <p><b>A worked example</b>, large blocks, 2 MiB pages, the range starting empty:
 * <pre>
 *   allocate 3,000,000 → A = 3,000,320 bytes at offset 0; its pages 0–1 are mapped in one call
 *   allocate 5 MiB     → B = 5,242,880 bytes at 3,000,320 (best fit: the free rest of the range);
 *                        it touches pages 1–3, page 1 is mapped already: one call maps pages 2–3
 *   free A             → A is free; B is live, nothing to merge. Page 0 is wholly free: cached
 *   allocate 2,500,000 → C = 2,500,096 bytes: best fit is A's gap (3,000,320 bytes, the other free
 *                        block is the rest of the range); split: C at 0, 500,224 free bytes after it.
 *                        Pages 0–1 are mapped: a pool hit, no backend call
 *   free B             → B merges with the 500,224 bytes before it and the free rest of the range
 *   trim(0)            → pages wholly free and mapped: 2–3 (page 1 is shared with C): one unmap call.
 *                        Reserved: 4 MiB (pages 0–1) for C's 2,500,096 bytes
 * </pre>
 *
 * <p><b>The fast path.</b> A small block freed with no device work in flight goes to a per-size-class stack (one of
 * the small arena's: one that took the large arena's space at the cap goes back to that arena, so that no later
 * request below the cap takes it there again) ({@link SizeClassCache}, striped by thread, one flag per stack) and a request of that exact size on the same
 * thread stripe takes it back from there: no pool lock, no tree. A miss there takes the lock and mapped free space
 * of the arena, so each thread builds a set of blocks of its own; another stripe's cached block is taken only once
 * small blocks hold their allowance (below), since a thread that took its blocks from another's stack would hand
 * them back and forth with it, with the cache lines they were written in. Cached blocks count as free (a snapshot shows them as free blocks, not yet coalesced); they are flushed into their arena
 * (and coalesced) on trim, close and under pressure, and before the pool asks the backend for memory, except
 * while small blocks hold less than {@value #SMALL_BLOCKS_KEPT_UNFLUSHED} bytes for each thread stripe that keeps
 * blocks (up to one per processor): then the small arena grows instead, so that a set of recurring sizes larger
 * than what is mapped stays cached rather than being flushed every few dozen allocations.
 *
 * <p><b>Reservations.</b> Requests under a budget's reservation ({@link BackendResource#reservingBudget}: the outermost
 * reserving budget at or above the requesting one) take their blocks from a small and a large arena of that
 * reservation's own, made as its first request comes, and never through the fast path's cache, whose blocks any thread
 * may take; no one else's request takes memory from them. So what a reserving tenant frees stays cached for it, not lent
 * to a neighbour (or another tenant) whose blocks would then keep it: a small block in a plain 20 MiB segment pins all of
 * it. The upstream keeps room under the cap for each reservation beyond its live blocks in its arenas
 * ({@link BackendResource#keptAsideBytes}): other arenas grow only into what is left. Not beyond all its arenas hold:
 * memory it freed beside a block still live (a plain segment, a page) is no room for a larger request of its own.
 * Trims give the shared arenas' memory back first. A reserving budget's close ends its reservation
 * ({@link #endReservation}): its arenas are dropped, their memory given back, once they hold no block.
 *
 * <p><b>Pressure.</b> A request larger than the cap fails at once, the cache left as it is: nothing the pool
 * could give back would make room for it. When the backend has no memory or the upstream's limit would be
 * passed, the pool gives back all it caches (free plain segments, free mapped pages) and retries once,
 * mapping no slack, then in the other arena's mapped free space (a small block in the large arena's, a large one in
 * the small arena's plain segments: at the cap, memory the pool holds is not refused for its kind), then on a run of
 * mapped pages inside a free block whose first page is not mapped (a page shared with a live block, which no trim gives
 * back, beyond one given back); if blocks are
 * pending on device work it then waits for them and tries again (unless the
 * allocation may not wait: {@link DeviceWork#withoutWaiting}); then it throws
 * {@link DeviceOutOfMemoryException}: the pool's figures (live, cached, largest free block, pending blocks)
 * before the upstream's own refusal (what was asked, the cap, what the device has free). {@link #trim} gives back the same way until at most
 * {@code keepBytes} stay cached ({@code cached = reserved − live}; bytes of pages shared with live blocks
 * cannot be given back, so a trim may keep a little more).
 *
 * <p><b>Device work in flight.</b> A block freed with an incomplete future is PENDING: it is not reused, nor
 * its pages unmapped, until the future completes. The caller is never blocked: completion puts the block on
 * a queue that the next allocate, free or trim drains. Only an allocation that finds no memory otherwise waits
 * for pending work, and close() does; both at most {@link PoolSettings#deviceWaitTimeout()}: then the allocation
 * fails saying the work may be stuck, and close() keeps the segments rather than free them under the work.
 *
 * <p><b>Compaction.</b> {@link #compactionOrder()} ranks the segments by the bytes in use in them, fullest first, and
 * lists the live blocks from the last place to the first (the sparsest segment's highest block first); for each,
 * {@link #relocate} takes the first free place before the block's own that holds it whole with its pages mapped,
 * copies the block there and swaps the two: the block object, which its user holds, now says the new place, and the
 * old place is freed and coalesces. Blocks gather in full segments and low addresses; whole segments and pages at the
 * top of a range empty, and the trim after gives them back. A move into a range's unmapped free space maps its pages
 * only where the move frees more pages at the old place, and unmaps those at once: a move never raises what the pool
 * reserves. It moves only a block its caller vouches nothing uses.
 *
 * <p><b>Figures.</b> Reserved bytes are plain segments plus mapped pages (address ranges reserved but not
 * mapped cost nothing and are not counted); a pool hit is an allocation that made no backend call.
 * {@code backendAllocations} counts segment allocations and page maps, {@code backendFrees} segment frees
 * and page unmaps. They are counted where the pool changes (in the upstream's ledger, and striped counts for the hits)
 * and read without the pool's lock. Reading them, a snapshot or the segments changes nothing in the pool: no
 * completion is drained, no cached block flushed. Only the largest free block is found under the lock, in the
 * free blocks largest first (most often the first one answers), and in the cache's stacks, each under its own
 * lock for a moment. The segments and their blocks (a snapshot) are read a stretch at a time, a fraction of a
 * millisecond under the lock each, however many blocks there are, and come out as they were at one moment: while a
 * reader runs, the slow path logs each block it changes ({@link PoolSnapshotReader} says how and why that is exact).
 *
 * <p>Thread-safe: any thread may allocate and free. The fast path takes one cache stack's lock; everything
 * else takes the pool's one lock, held also across the rare backend calls that get or give back memory, except a
 * trim's: it takes the memory it gives back out of the arenas under the lock, calls the backend without it (a hung
 * driver holds up no allocation or figure read) and settles under it again; close and an allocation out of memory wait,
 * bounded, for such trims. The lock is never held while waiting for device work.
 */
public final class CachingPoolResource implements MemoryResource, InspectableResource {

    private final BackendResource upstream;
    private final MemoryLocation location;
    private final Duration deviceWaitTimeout;
    private final MemoryEventListener events;
    private final PoolArena small;
    private final PoolArena large;
    /** {@link #small} and {@link #large}: the arenas of requests under no reservation. */
    private final PoolArena[] shared;
    /** How the arenas map pages, for those made later (a reservation's); null for plain segments. */
    private final @Nullable PageMapping pages;
    /**
     * The small and the large arena of each reservation (see "Reservations" above), by its key: made as its first request
     * comes, dropped once its budget has closed and they hold no block. Changed under the lock.
     */
    private final Map<Object, PoolArena[]> reservedArenas = new ConcurrentHashMap<>();
    /** Reservations whose budget closed while their arenas held blocks: dropped as the last goes. Under the lock. */
    private final Set<Object> endedReservations = new HashSet<>();
    /**
     * Every arena, the shared ones first: what trims give back first, and what figures, snapshots and closes walk.
     * Replaced, under the lock, as reservations' arenas come and go.
     */
    private volatile List<PoolArena> arenas;
    private final SizeClassCache cache = new SizeClassCache();
    /**
     * Small blocks may take this much memory before a miss flushes the fast path's cache rather than grow.
     * Below it, sizes that recur stay cached however many there are (one thread walking 1,024 mixed sizes
     * would otherwise flush every few dozen allocations, and two threads meet on the lock each time); above
     * it, small blocks are as frugal as large ones. PyTorch keeps every small segment until emptied.
     */
    static final long SMALL_BLOCKS_KEPT_UNFLUSHED = 32L << 20;

    /** The fields of {@link #counts}. */
    private static final int POOL_HITS = 0;
    private static final int POOL_MISSES = 1;
    private static final int OOM_RETRIES = 2;

    private final ReentrantLock lock = new ReentrantLock();
    /** Signalled as the last trim giving memory back without the lock ({@link #trim}) puts it in the books. */
    private final Condition trimsEnded = lock.newCondition();
    /** Trims whose backend calls are under way, without the lock. Under the lock. */
    private int trimsUnderWay;
    /** The bytes those trims give back, still reserved until the backend has returned. Changed under the lock. */
    private volatile long bytesBeingReleased;
    private final Map<PoolBlock, CompletableFuture<?>> pending = new IdentityHashMap<>();
    private final ConcurrentLinkedQueue<Completion> completed = new ConcurrentLinkedQueue<>();
    /** The slow path's hits, misses and retries, per thread stripe (the fast path's hits are counted by the cache's stacks). */
    private final StripedLongs counts = new StripedLongs();
    private volatile boolean closed;
    /** What the pool takes memory from its upstream in multiples of: a page, or a plain segment's unit. */
    private final long piece;
    /** {@link #largestPossibleBytes}: the upstream's limits are fixed at its creation. */
    private final long largestPossible;
    /** The free figures as last found under the lock (null: not yet): what a listener reads when the lock is not free. */
    private volatile @Nullable FreeFigures freeLastFound;
    /** A log per snapshot reader running ({@link #segments}) of the blocks changed; none while no reader runs. Under the lock. */
    private ChangeLog[] changes = new ChangeLog[0];

    /** Device work on a pending block has completed; the pair, because the block may have been freed again since. */
    private record Completion(PoolBlock block, CompletableFuture<?> work) {}

    /** A pool over {@code upstream}, which it closes with itself; {@code events} hears of out-of-memory recoveries. */
    public CachingPoolResource(BackendResource upstream, PoolSettings settings, MemoryEventListener events) {
        this.upstream = upstream;
        this.location = upstream.location();
        this.deviceWaitTimeout = settings.deviceWaitTimeout();
        this.events = SafeEventListener.guard(events);
        PageMapping pages = settings.layout() == PoolSettings.Layout.EXPANDABLE_SEGMENTS ? upstream.pageMapping() : null;
        this.pages = pages;
        this.small = new PoolArena(PoolArena.Kind.SMALL, null, upstream, this, pages);
        this.large = new PoolArena(PoolArena.Kind.LARGE, null, upstream, this, pages);
        this.shared = new PoolArena[] {small, large};
        this.arenas = List.of(large, small);
        upstream.countLiveForReservations(this::liveFor);
        this.piece = pages != null ? pages.granularity() : SizeClasses.SMALL_SEGMENT;
        this.largestPossible = upstream.largestPossibleBytes() / piece * piece;
    }

    /** The resource this pool takes its memory from. */
    public BackendResource upstream() {
        return upstream;
    }

    /** True when this pool maps pages into reserved ranges rather than allocating plain segments. */
    public boolean expandable() {
        return large.expandable();
    }

    /**
     * The largest request that memory given back could ever make room for in this pool: the upstream's, rounded down
     * to the pieces the pool takes memory in (its pages, or plain segments of whole {@value SizeClasses#SMALL_SEGMENT}
     * bytes). Under a cap of 5 MiB no block above 4 MiB can ever be had, however much is freed.
     */
    public long largestPossibleBytes() {
        return largestPossible;
    }

    /** The whole pieces the pool takes memory from its upstream in, as a message says them. */
    public String pieces() {
        return expandable() ? "pages of " + piece + " bytes"
                : "plain segments, in whole " + piece + " bytes for blocks over " + SizeClasses.SMALL_LIMIT + " bytes and "
                        + SizeClasses.SMALL_SEGMENT_UNIT + " for smaller ones";
    }

    /**
     * The least a batch of blocks of {@code bytes}, each at most {@link #largestPossibleBytes}, takes from upstream
     * wherever it is placed: the blocks, rounded, in whole pieces; with plain segments the large blocks' in whole
     * pieces, and the small blocks that the free tail of those segments cannot hold (at the cap a small block takes
     * the large arena's free space) in small segments of their own.
     * Long.MAX_VALUE where that passes a long's range.
     */
    public long leastTakenFor(long[] bytes) {
        return leastTakenFor(bytes, i -> 1);
    }

    /** As {@link #leastTakenFor(long[])}, for {@code count.applyAsLong(i)} blocks of {@code bytes[i]} each (a warm-up's). */
    public long leastTakenFor(long[] bytes, IntToLongFunction count) {
        long small = 0;
        long large = 0;
        try {
            for (int i = 0; i < bytes.length; i++) {
                long size = SizeClasses.round(bytes[i]);
                long blocks = Math.multiplyExact(size, count.applyAsLong(i));
                if (SizeClasses.small(size)) {
                    small = Math.addExact(small, blocks);
                } else {
                    large = Math.addExact(large, blocks);
                }
            }
            if (expandable()) { // a large block may take the small arena's pages: only the sum is bound to whole pages
                return Math.multiplyExact(Math.ceilDiv(Math.addExact(small, large), piece), piece);
            }
            long largeSegments = Math.multiplyExact(Math.ceilDiv(large, piece), piece);
            long smallBeyondTheirTail = Math.max(0, small - (largeSegments - large));
            return Math.addExact(SizeClasses.leastSmallSegments(smallBeyondTheirTail), largeSegments);
        } catch (ArithmeticException tooLarge) {
            return Long.MAX_VALUE;
        }
    }

    // ---- allocation -------------------------------------------------------------------------------------------

    @Override
    public Block allocate(long bytes) {
        if (bytes > SizeClasses.LARGEST_ROUNDABLE) {
            throw upstream.limits().aboveLimit(bytes, bytes); // no rounding for it: a long would overflow
        }
        long size = SizeClasses.round(bytes);
        if (SizeClasses.small(size) && completed.isEmpty() && upstream.reservingBudget() == null) {
            PoolBlock cached = cache.take(size, bytes);
            if (cached != null) {
                return cached;
            }
        }
        refuseReentry();
        lock.lock();
        try {
            ensureOpen();
            if (size > largestPossibleBytes()) {
                throw upstream.limits().aboveLimit(bytes, SizeClasses.roundUp(size, piece), largestPossible); // what it would take from upstream
            }
            drainCompleted();
            return allocateLocked(size, bytes);
        } finally {
            lock.unlock();
        }
    }

    /**
     * Blocks for a batch, carved one after another from free memory the pool holds mapped: the small ones from one
     * region of the small arena and the large ones from one region of the large arena (the two never share memory),
     * each region found by best fit for the sum of its blocks' rounded sizes, as one block of that size would be.
     * Null, with nothing taken and no backend call, where an arena holds no such region. The blocks are independent:
     * each is freed alone and coalesces with free neighbours only.
     */
    @Override
    public @Nullable List<Block> allocateAdjacent(long[] bytes) {
        long[] sizes = new long[bytes.length];
        long smallTotal = 0;
        long largeTotal = 0;
        long largest = largestPossibleBytes();
        for (int i = 0; i < bytes.length; i++) {
            if (bytes[i] > largest) {
                return null; // allocated alone, it fails as above the limit, saying so
            }
            sizes[i] = SizeClasses.round(bytes[i]);
            boolean isSmall = SizeClasses.small(sizes[i]);
            if (sizes[i] > largest - (isSmall ? smallTotal : largeTotal)) {
                return null; // no region can hold it (checked so that the sums never overflow)
            }
            if (isSmall) {
                smallTotal += sizes[i];
            } else {
                largeTotal += sizes[i];
            }
        }
        refuseReentry();
        lock.lock();
        try {
            ensureOpen();
            drainCompleted();
            PoolArena[] pair = arenasFor(upstream.reservingBudget());
            boolean reserving = pair != shared;
            PoolArena smallArena = pair[0];
            PoolArena largeArena = pair[1];
            PoolBlock smallRegion = smallTotal == 0 ? null : smallArena.take(smallTotal, smallTotal, PoolArena.Mapping.MAPPED_ONLY, PoolArena.Growth.EXACT);
            if (smallTotal > 0 && smallRegion == null) {
                return null;
            }
            PoolBlock largeRegion = largeTotal == 0 ? null : largeArena.take(largeTotal, largeTotal, PoolArena.Mapping.MAPPED_ONLY, PoolArena.Growth.EXACT);
            if (largeTotal > 0 && largeRegion == null) {
                if (smallRegion != null) {
                    smallArena.release(smallRegion);
                }
                return null;
            }
            List<Block> blocks = new ArrayList<>(bytes.length);
            for (int i = 0; i < bytes.length; i++) {
                if (SizeClasses.small(sizes[i])) {
                    PoolBlock block = Objects.requireNonNull(smallRegion, "small region");
                    smallRegion = PoolArena.cut(block, sizes[i], bytes[i]);
                    if (!reserving) {
                        cache.adopt(block);
                    }
                    blocks.add(block);
                } else {
                    blocks.add(Objects.requireNonNull(largeRegion, "large region"));
                    largeRegion = PoolArena.cut(largeRegion, sizes[i], bytes[i]);
                }
            }
            counts.add(POOL_HITS, bytes.length);
            return blocks;
        } finally {
            lock.unlock();
        }
    }

    /**
     * Refuses an allocation from under the pool's own lock: a listener of a backend call, told while the pool is mid-change
     * on this thread (a block taken, its pages being mapped), would take memory the pool has not yet recorded as mapped,
     * map it a second time and leave reserved bytes that nothing holds. And one from any listener
     * ({@link UserCode#refuseInListener}), asked here rather than before the cache, which takes no lock.
     */
    private void refuseReentry() {
        if (lock.isHeldByCurrentThread()) {
            throw new IllegalStateException(location + " memory pool: allocation from within a backend call's listener"
                    + " (MemoryEventListener.backendAllocated or backendFreed), told under the pool's lock while the pool is"
                    + " mid-change on this thread; allocate after the call returns instead");
        }
        UserCode.refuseInListener(location);
    }

    private PoolBlock allocateLocked(long size, long requested) {
        PoolArena[] pair = arenasFor(upstream.reservingBudget());
        PoolArena arena = SizeClasses.small(size) ? pair[0] : pair[1];
        DeviceOutOfMemoryException refusal;
        try {
            return takeOrGrow(arena, size, requested, PoolArena.Growth.WITH_SLACK);
        } catch (DeviceOutOfMemoryException e) {
            refusal = e;
        }
        long recoveryStart = System.nanoTime();
        counts.add(OOM_RETRIES, 1);
        RuntimeException giveBackRefused = releaseAllCached();
        try {
            return recovered(takeOrGrow(arena, size, requested, PoolArena.Growth.EXACT), requested, recoveryStart);
        } catch (DeviceOutOfMemoryException e) {
            refusal = e;
        }
        PoolBlock elsewhere = takeFromFreeMemoryHeld(pair, arena, size, requested);
        if (elsewhere != null) {
            return recovered(elsewhere, requested, recoveryStart);
        }
        boolean stuck = false;
        boolean interrupted = false;
        if ((!pending.isEmpty() || trimsUnderWay > 0) && DeviceWork.mayWait()) {
            // memory a trim is giving back counts as reserved until the backend returns: waited for as pending work is
            boolean finished = awaitTrims(System.nanoTime() + deviceWaitTimeout.toNanos()) & awaitPending();
            interrupted = !finished && Thread.currentThread().isInterrupted(); // a wait cut short, not work that did not finish
            stuck = !finished && !interrupted;
            ensureOpen();
            drainCompleted();
            RuntimeException refusedAgain = releaseAllCached();
            giveBackRefused = giveBackRefused != null ? giveBackRefused : refusedAgain;
            try {
                return recovered(takeOrGrow(arena, size, requested, PoolArena.Growth.EXACT), requested, recoveryStart);
            } catch (DeviceOutOfMemoryException e) {
                refusal = e;
            }
            elsewhere = takeFromFreeMemoryHeld(pair, arena, size, requested);
            if (elsewhere != null) {
                return recovered(elsewhere, requested, recoveryStart);
            }
        }
        events.outOfMemoryRecovery(location, requested, MemoryEventListener.RecoveryOutcome.FAILED, System.nanoTime() - recoveryStart);
        DeviceOutOfMemoryException outOfMemory = outOfMemory(requested, size, refusal, stuck, interrupted);
        if (giveBackRefused != null) {
            outOfMemory.addSuppressed(giveBackRefused);
        }
        throw outOfMemory;
    }

    private PoolBlock recovered(PoolBlock block, long requested, long recoveryStart) {
        events.outOfMemoryRecovery(location, requested, MemoryEventListener.RecoveryOutcome.RECOVERED, System.nanoTime() - recoveryStart);
        return block;
    }

    /**
     * A block from memory held (a hit): mapped free space of its arena; else, for a small block once small blocks hold
     * their allowance, one cached on another thread's stripe, or mapped free space after flushing the cache; else, for
     * a large block, mapped free space after flushing, or of the small arena where pages are mapped; failing these,
     * from new upstream memory (a miss). A small block is made the calling thread's: its frees go to this thread's
     * stripe of the cache. An arena for reservations takes nothing from the cache, nor from the shared arenas.
     */
    private PoolBlock takeOrGrow(PoolArena arena, long size, long requested, PoolArena.Growth growth) {
        boolean shared = arena.reservation() == null;
        PoolArena smallArena = shared ? small : arenasFor(arena.reservation())[0];
        PoolBlock block = arena.take(size, requested, PoolArena.Mapping.MAPPED_ONLY, growth);
        if (block == null) {
            boolean economize = shared && (arena != small || small.reservedBytes() >= smallBlocksKeptUnflushed());
            if (economize && arena == small) {
                block = cache.takeFromOtherStripes(size, requested);
                if (block != null) {
                    cache.adopt(block);
                    return block; // counted as a hit by the stack it came from
                }
            }
            if (economize) {
                cache.flush(this::releaseToArena);
                block = arena.take(size, requested, PoolArena.Mapping.MAPPED_ONLY, growth);
            }
            if (block == null && arena != smallArena && smallArena.expandable()) {
                block = smallArena.take(size, requested, PoolArena.Mapping.MAPPED_ONLY, growth);
            }
            long callsBefore = upstream.backendAllocations();
            if (block == null) {
                block = arena.take(size, requested, PoolArena.Mapping.MAY_MAP, growth);
            }
            if (block == null) {
                arena.grow(size, growth);
                block = arena.take(size, requested, PoolArena.Mapping.MAY_MAP, growth);
                if (block == null) {
                    throw new IllegalStateException(arena + " grew but has no free block of " + size + " bytes");
                }
            }
            counts.add(upstream.backendAllocations() != callsBefore ? POOL_MISSES : POOL_HITS, 1);
        } else {
            counts.add(POOL_HITS, 1);
        }
        if (SizeClasses.small(size) && shared) {
            cache.adopt(block);
        }
        return block;
    }

    /**
     * The last place a request's block may go once the pool can grow no more: mapped free space of the other arena of
     * its pair, which the two kinds otherwise keep apart (small blocks would split the large free spaces big tensors
     * need; a large block takes the small arena's only where pages are mapped); else a run of mapped pages inside a
     * free block of either arena that does not start on one (placement takes a free block's first bytes). At the cap,
     * a request that fits in free memory the pool holds is not refused for its kind or its place. Null where none fits.
     */
    private @Nullable PoolBlock takeFromFreeMemoryHeld(PoolArena[] pair, PoolArena arena, long size, long requested) {
        PoolArena other = arena == pair[0] ? pair[1] : pair[0];
        PoolBlock block = other.take(size, requested, PoolArena.Mapping.MAPPED_ONLY, PoolArena.Growth.EXACT);
        if (block == null) {
            block = arena.takeFromAMappedRun(size, requested);
        }
        if (block == null) {
            block = other.takeFromAMappedRun(size, requested);
        }
        if (block != null) {
            counts.add(POOL_HITS, 1);
            if (SizeClasses.small(size) && block.arena() == small) {
                cache.adopt(block); // a small block in its own arena's mapped run: cached when freed, as any
            }
        }
        return block;
    }

    /**
     * What small blocks may hold before a miss economizes (takes another thread's cached block, or flushes the cache)
     * rather than grow: {@link #SMALL_BLOCKS_KEPT_UNFLUSHED} for each thread stripe that keeps blocks (the calling
     * thread's, and each that has cached a block since the last flush), up to one per processor. Each thread keeps the blocks it allocated, so
     * two threads walking the same recurring sizes hold them twice; with one allowance for both, each would flush or
     * take the other's blocks over and over.
     */
    private long smallBlocksKeptUnflushed() {
        return SMALL_BLOCKS_KEPT_UNFLUSHED * Math.min(cache.stripesKeeping(), Runtime.getRuntime().availableProcessors());
    }

    /**
     * The small and large arena of {@code reservation}'s requests, made now if need be; the shared ones for null, and for
     * a reservation whose budget has closed (a request under way as the close came): arenas made for it would never be
     * dropped ({@link #endReservation} has run). Under the lock, which {@link #endReservation} takes too.
     */
    private PoolArena[] arenasFor(@Nullable Object reservation) {
        if (reservation == null) {
            return shared;
        }
        PoolArena[] pair = reservedArenas.get(reservation);
        if (pair == null) {
            if (!upstream.reservationStands(reservation)) {
                return shared;
            }
            pair = new PoolArena[] {new PoolArena(PoolArena.Kind.SMALL, reservation, upstream, this, pages),
                    new PoolArena(PoolArena.Kind.LARGE, reservation, upstream, this, pages)};
            reservedArenas.put(reservation, pair);
            List<PoolArena> more = new ArrayList<>(arenas);
            more.add(pair[1]);
            more.add(pair[0]);
            arenas = List.copyOf(more);
        }
        return pair;
    }

    /**
     * The bytes of {@code reservation}'s live (and pending) blocks, which the upstream counts toward the room it keeps
     * for the reservation (see "Reservations" above). Read where the upstream checks its room, under this pool's lock.
     */
    private long liveFor(Object reservation) {
        PoolArena[] pair = reservedArenas.get(reservation);
        return pair == null ? 0 : pair[0].takenBytes() + pair[1].takenBytes(); // nothing of theirs is cached
    }

    /**
     * {@code check} under this pool's lock, where the live memory of the reservations' arenas ({@link #liveFor}), which
     * the upstream reads to know the room it keeps, holds still: taken, as a growth takes it, before the upstream's monitor.
     */
    public long withReservationsStill(LongSupplier check) {
        lock.lock();
        try {
            return check.getAsLong();
        } finally {
            lock.unlock();
        }
    }

    /**
     * The budget of {@code reservation} has closed, and its buffers with it: its arenas are dropped, their memory given
     * back, once they hold no block (at once, or as the last pending one is freed).
     */
    public void endReservation(Object reservation) {
        lock.lock();
        try {
            if (!closed && reservedArenas.containsKey(reservation)) {
                endedReservations.add(reservation);
                dropEndedReservations();
            }
        } finally {
            lock.unlock();
        }
    }

    /**
     * Drops the arenas of ended reservations that hold no block, giving their memory back; none while a trim gives memory
     * back without the lock, whose settling may be in them (it drops them as it ends). Under the lock.
     */
    private void dropEndedReservations() {
        if (endedReservations.isEmpty() || trimsUnderWay > 0) {
            return;
        }
        for (Iterator<Object> it = endedReservations.iterator(); it.hasNext(); ) {
            Object reservation = it.next();
            PoolArena[] pair = reservedArenas.get(reservation);
            if (liveFor(reservation) > 0) {
                continue;
            }
            it.remove();
            if (pair == null) {
                continue;
            }
            reservedArenas.remove(reservation);
            List<PoolArena> fewer = new ArrayList<>(arenas);
            fewer.removeAll(List.of(pair));
            arenas = List.copyOf(fewer);
            try {
                pair[0].close();
                pair[1].close();
            } catch (RuntimeException refused) {
                // what the backend did not take back is its books' (FailedFrees), as at any close
                System.getLogger(CachingPoolResource.class.getName()).log(System.Logger.Level.WARNING, this
                        + ": giving back the memory of a closed budget's reservation failed", refused);
            }
        }
    }

    private void releaseToArena(PoolBlock block) {
        block.arena().release(block);
        if (block.arena().reservation() != null && endedReservations.contains(block.arena().reservation())) {
            dropEndedReservations();
        }
    }

    /**
     * Gives back all the cached memory the backend takes, for an allocation out of memory to try again: a refusal stops
     * neither arena's release nor the retry, and is returned (the first one) for the out-of-memory error to carry.
     */
    private @Nullable RuntimeException releaseAllCached() {
        cache.flush(this::releaseToArena);
        RuntimeException refused = null;
        for (PoolArena arena : arenas) {
            try {
                arena.releaseCached(Long.MAX_VALUE);
            } catch (RuntimeException e) {
                if (refused == null) {
                    refused = e;
                }
            }
        }
        return refused;
    }

    /**
     * Waits, without the lock and at most the device wait timeout, for the device work that pending blocks wait on;
     * failed work counts as done. False when some did not finish in time.
     */
    private boolean awaitPending() {
        List<CompletableFuture<?>> inFlight = new ArrayList<>(pending.values());
        boolean finished = true;
        lock.unlock();
        try {
            finished = DeviceWork.awaitAll(inFlight, System.nanoTime() + deviceWaitTimeout.toNanos());
        } finally {
            lock.lock();
        }
        // the completion callbacks may still be on their way to the queue: free what is done now
        pending.entrySet().removeIf(entry -> {
            if (entry.getValue().isDone()) {
                releaseToArena(entry.getKey());
                return true;
            }
            return false;
        });
        return finished;
    }

    /**
     * The pool's figures before the upstream's refusal: together, what was asked, what is live and cached, the
     * largest free block, what is pending, the cap and what the device has free.
     */
    private DeviceOutOfMemoryException outOfMemory(long requested, long size, DeviceOutOfMemoryException refusal, boolean stuck,
                                                   boolean interrupted) {
        long live = liveBytes();
        long reserved = upstream.reservedBytes();
        // what held the memory: a trim that had not returned from the backend, device work, or both
        String trim = trimsUnderWay == 0 ? "" : "a trim giving back " + bytesBeingReleased + " bytes";
        boolean work = !pending.isEmpty() || trim.isEmpty();
        String deviceWork = work ? "device work that " + pending.size() + " freed block(s) wait on" : "";
        String why = stuck ? "; " + (trim.isEmpty() ? "" : trim + " had not returned from the backend within " + deviceWaitTimeout.toMillis()
                + " ms" + (work ? ", and " : "")) + (work ? deviceWork + " did not finish within " + deviceWaitTimeout.toMillis() + " ms" : "")
                + " (compute.memory.device-wait-timeout): the device, or a future recorded on a buffer, may be stuck"
                : interrupted ? "; the wait for " + trim + (!trim.isEmpty() && work ? " and " : "") + deviceWork
                + " was interrupted (the thread's interrupt is kept)" : "";
        return new DeviceOutOfMemoryException(location, requested, stuck ? OutOfMemoryReason.DEVICE_WORK_STUCK : refusal.reason(),
                "out of " + location + " memory: requested " + requested + " bytes (" + size + " after rounding); " + live
                + " bytes live (allocated), " + Math.max(0, reserved - live - bytesBeingReleased) + " bytes cached, " + reserved
                + " bytes reserved" + keptForReservations() + "; largest free block " + largestFreeBlocks() + "; " + pending.size()
                + " blocks pending on device work" + why
                + ". The pool released its cached memory and retried, and its upstream refused: " + refusal.getMessage());
    }

    /**
     * What the reservations' arenas hold, which only their own requests may use: said, lest their free memory (in the
     * cached bytes and the largest free block) read as memory the refused request could have had. Under the lock.
     */
    private String keptForReservations() {
        if (reservedArenas.isEmpty()) {
            return "";
        }
        return " (" + inReservations(PoolArena::reservedBytes) + " of them, " + inReservations(PoolArena::takenBytes)
                + " live, in the arenas of " + reservedArenas.size() + " budget reservation(s), which only requests under those take from)";
    }

    // ---- freeing ----------------------------------------------------------------------------------------------

    @Override
    public void deallocate(Block block, CompletableFuture<?> inFlight) {
        if (closed) {
            return;
        }
        if (!(block instanceof PoolBlock poolBlock) || !poolBlock.ownedBy(this)) {
            throw new IllegalArgumentException("this block was not allocated by this pool: " + block);
        }
        boolean done = inFlight.isDone();
        // the shared small arena's blocks only: a reservation's are its own, and a small block that took the large arena's
        // space at the cap goes back there, lest a later request below the cap take it again and hold a large segment
        if (done && SizeClasses.small(poolBlock.size()) && completed.isEmpty() && poolBlock.arena() == small
                && cache.offer(poolBlock)) {
            return;
        }
        lock.lock();
        try {
            if (closed) {
                return;
            }
            drainCompleted();
            if (poolBlock.state() != PoolBlock.LIVE) {
                throw new IllegalArgumentException("this block was freed already: " + block);
            }
            if (done) {
                releaseToArena(poolBlock);
                return;
            }
            poolBlock.arena().pend(poolBlock);
            pending.put(poolBlock, inFlight);
        } finally {
            lock.unlock();
        }
        // may run at once, on this thread: the block then waits on the queue for the next operation
        inFlight.whenComplete((result, failure) -> completed.add(new Completion(poolBlock, inFlight)));
    }

    /** Frees the blocks whose device work has completed. Under the lock. */
    private void drainCompleted() {
        for (Completion done; (done = completed.poll()) != null; ) {
            if (pending.remove(done.block(), done.work())) {
                releaseToArena(done.block());
            }
        }
    }

    // ---- compaction -------------------------------------------------------------------------------------------

    /** How a move copies a block's bytes from its place to its new one (a copy within the device, done when it returns). */
    @FunctionalInterface
    public interface BlockCopy {
        void copy(Block from, Block to);
    }

    /**
     * True for a block of this pool that compaction may move for its user: a large one. Small blocks are not: they
     * come and go on the fast path, where registering a user for each would cost more than their moves win.
     */
    public boolean movable(Block block) {
        return block instanceof PoolBlock poolBlock && !SizeClasses.small(poolBlock.size) && poolBlock.ownedBy(this);
    }

    /** The size of the smallest block {@link #movable} may accept: anything smaller never moves. */
    public long smallestMovableBytes() {
        return SizeClasses.SMALL_LIMIT + 1;
    }

    /**
     * The live blocks in the order a compaction tries to move them ({@link #relocate}): the sparsest segments' first,
     * each segment's from its end, so that blocks gather in the fullest segments and at low offsets, and what empties
     * (whole plain segments, pages at the top of a range) can be given back. Blocks the fast path caches and blocks
     * whose device work completed are made free first, so that free space is coalesced; pending blocks are not
     * listed. Empty when the calling thread holds the pool's lock already.
     */
    public List<Block> compactionOrder() {
        if (lock.isHeldByCurrentThread() || UserCode.inListener()) {
            // asked from under the pool's own lock, or another's (a listener of a backend call): moving would take users'
            // locks while holding it, the reverse of a move's order, so nothing is offered
            return List.of();
        }
        lock.lock();
        try {
            ensureOpen();
            drainCompleted();
            cache.flush(this::releaseToArena);
            List<Block> order = new ArrayList<>();
            for (PoolArena arena : arenas) {
                order.addAll(arena.compactionOrder());
            }
            return order;
        } finally {
            lock.unlock();
        }
    }

    /**
     * Moves a live block to the first free place before its own in compaction's order ({@link #compactionOrder}) that
     * the pool holds mapped, or whose pages, mapped for it, are fewer than the move frees (and unmaps) at the old
     * place, so that a move never raises what the pool reserves: copies its bytes there with
     * {@code copy}, under the pool's lock (neither place can be freed or handed out meanwhile), then the block is at the
     * new place (its {@link Block#segment()} and {@link Block#offset()} say so) and its old place is free. The caller
     * must guarantee that nothing reads or writes the block's memory until this returns. False, with nothing changed,
     * where there is no such place. Throws {@link IllegalArgumentException} for a block that is not live in this pool,
     * {@link IllegalStateException} once closed; a failing copy leaves the block where it was.
     */
    public boolean relocate(Block block, BlockCopy copy) {
        return relocateReleasing(block, copy) >= 0;
    }

    /**
     * As {@link #relocate}, saying what the move gave back: -1 where it found no place, else the bytes the pool reserves
     * less after it (the pages it unmapped at the old place beyond those it mapped at the new one; 0 for most moves).
     */
    public long relocateReleasing(Block block, BlockCopy copy) {
        if (!(block instanceof PoolBlock poolBlock) || !poolBlock.ownedBy(this)) {
            throw new IllegalArgumentException("this block was not allocated by this pool: " + block);
        }
        lock.lock();
        try {
            ensureOpen();
            if (poolBlock.state() != PoolBlock.LIVE) {
                throw new IllegalArgumentException("only a live block can be moved: " + block);
            }
            PoolArena arena = poolBlock.arena();
            long reserved = arena.reservedBytes();
            PoolBlock place = arena.takePlaceBefore(poolBlock);
            if (place == null) {
                return -1;
            }
            try {
                copy.copy(poolBlock, place);
            } catch (RuntimeException | Error e) {
                CompletableFuture<?> queued = QueuedWorkTimeoutException.leftQueuedBy(e);
                if (queued == null || queued.isDone()) {
                    arena.release(place);
                } else {
                    // the copy, queued before its wait timed out, may still write the place: freed once it is over
                    arena.pend(place);
                    pending.put(place, queued);
                    queued.whenComplete((result, failure) -> completed.add(new Completion(place, queued)));
                }
                throw e;
            }
            arena.completeMove(poolBlock, place, arena.reservedBytes() > reserved);
            return Math.max(0, reserved - arena.reservedBytes());
        } finally {
            lock.unlock();
        }
    }

    // ---- trimming and figures ---------------------------------------------------------------------------------

    /**
     * Nothing, when the calling thread holds the pool's lock already (a listener of a backend call trims), or runs a
     * listener, which may be told under another pool's lock.
     */
    @Override
    public long trim(long keepBytes) {
        if (lock.isHeldByCurrentThread() || UserCode.inListener()) {
            return 0; // the pool is mid-change on this thread: giving back pages now would unmap those it is mapping
        }
        List<PoolArena.Release> taken;
        long bytesTaken = 0;
        lock.lock();
        try {
            if (closed) {
                return 0;
            }
            drainCompleted();
            cache.flush(this::releaseToArena);
            // the arenas' books, not the upstream's: these count what other trims give back until they settle it, so that
            // bytesBeingReleased is taken off once, even where a backend call of those trims has returned already
            long excess = arenasReservedBytes() - bytesBeingReleased - liveBytes() - Math.max(0, keepBytes);
            if (excess <= 0) {
                return 0;
            }
            taken = new ArrayList<>();
            for (PoolArena arena : arenas) {
                if (bytesTaken < excess) {
                    for (PoolArena.Release release : arena.takeCached(excess - bytesTaken)) {
                        taken.add(release);
                        bytesTaken += release.bytes();
                    }
                }
            }
            if (taken.isEmpty()) {
                return 0;
            }
            trimsUnderWay++;
            bytesBeingReleased += bytesTaken;
        } finally {
            lock.unlock();
        }
        // the backend's calls without the lock: a slow or hung driver holds up no allocation, free or read of the figures
        int givenBack = 0;
        long released = 0;
        Throwable refused = null;
        try {
            for (PoolArena.Release release : taken) {
                boolean finished = release.giveBack();
                givenBack++; // out of the pool either way: a free left unfinished is the upstream's to end
                released += finished ? release.bytes() : 0;
            }
        } catch (RuntimeException | Error e) {
            refused = e; // what was not given back stays the pool's, cached, for a later trim to try again
        }
        lock.lock();
        try {
            for (int i = 0; i < taken.size(); i++) {
                PoolArena.Release release = taken.get(i);
                release.block().arena().settle(release, i < givenBack);
            }
            bytesBeingReleased -= bytesTaken;
            if (--trimsUnderWay == 0) {
                trimsEnded.signalAll();
                dropEndedReservations();
            }
        } finally {
            lock.unlock();
        }
        if (refused instanceof RuntimeException e) {
            throw e;
        }
        if (refused instanceof Error e) {
            throw e;
        }
        return released;
    }

    /**
     * Waits, at most until {@code deadline} ({@link System#nanoTime()}), for the trims giving memory back without the lock
     * to put it in the books; under the lock, which the wait lets go of. False where some had not by then, or the thread
     * is interrupted (its flag set again), as {@link DeviceWork#awaitAll} is.
     */
    private boolean awaitTrims(long deadline) {
        while (trimsUnderWay > 0) {
            long left = deadline - System.nanoTime();
            if (left <= 0) {
                return false;
            }
            try {
                trimsEnded.awaitNanos(left);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt(); // a wait cut short: the caller says so
                return false;
            }
        }
        return true;
    }

    /**
     * Takes requests out of the hit and miss counts: those of a warm-up, which no caller made (its segments still count
     * as backend allocations).
     */
    public void uncount(long hits, long misses) {
        counts.add(POOL_HITS, -hits);
        counts.add(POOL_MISSES, -misses);
    }

    /**
     * Bytes that trims are giving back now, without the lock: reserved until the backend returns, but no cache, since
     * nothing can be served from them.
     */
    public long bytesBeingReleased() {
        return bytesBeingReleased;
    }

    /** Allocations served from memory held: from the size-class cache or an arena, without a backend call. */
    public long poolHits() {
        return counts.sum(POOL_HITS) + cache.hits();
    }

    /** Allocations that needed memory from the upstream. */
    public long poolMisses() {
        return counts.sum(POOL_MISSES);
    }

    /** Allocations that met out-of-memory and released the cache to retry. */
    public long oomRetries() {
        return counts.sum(OOM_RETRIES);
    }

    @Override
    public long reservedBytes() {
        return upstream.reservedBytes();
    }

    @Override
    public long reservedBytesPeak() {
        return upstream.reservedBytesPeak();
    }

    @Override
    public int segmentCount() {
        return upstream.segmentCount();
    }

    /**
     * The largest free block a request under no reservation can take without a call upstream: the shared arenas' and
     * the cache's. Free memory in reservations' arenas is no such block ({@link #reservationsCachedBytes}).
     */
    @Override
    public long largestFreeBlockBytes() {
        return freeFigures().largestShared();
    }

    /** What the reservations' arenas hold and no block uses: cached, but only for requests under those reservations. */
    @Override
    public long reservationsCachedBytes() {
        return freeFigures().inReservations();
    }

    /** {@link #largestFreeBlockBytes} and {@link #reservationsCachedBytes}, found at one moment. */
    private record FreeFigures(long largestShared, long inReservations) {
    }

    /**
     * Found under the lock, largest free blocks first (most often the first answers), and in the cache's stacks. A
     * listener that finds the lock taken reads the figures last found instead: it may be told under another pool's lock,
     * and waiting here could deadlock with a listener of this pool reading that one's figures.
     */
    private FreeFigures freeFigures() {
        FreeFigures last = freeLastFound;
        // a listener with figures found before takes the lock only if it is free; any other read as a snapshot's does
        boolean locked = last != null && UserCode.inListener() && !lock.isHeldByCurrentThread() ? lock.tryLock() : lockedToRead();
        if (!locked) {
            return last != null ? last : new FreeFigures(0, 0);
        }
        try {
            // nothing of the reservations' is cached: what their arenas hold and no block takes is free
            FreeFigures found = new FreeFigures(largestSharedFreeBlock(),
                    inReservations(PoolArena::reservedBytes) - inReservations(PoolArena::takenBytes));
            freeLastFound = found;
            return found;
        } finally {
            lock.unlock();
        }
    }

    /**
     * The largest free block for the out-of-memory message: outside the reservations' arenas and, where there are some,
     * within them, since a request under one takes from those. Under the lock.
     */
    private String largestFreeBlocks() {
        long outside = largestSharedFreeBlock();
        if (reservedArenas.isEmpty()) {
            return outside + " bytes";
        }
        long within = 0;
        for (PoolArena[] pair : reservedArenas.values()) {
            within = Math.max(within, Math.max(pair[0].largestFreeBlock(), pair[1].largestFreeBlock()));
        }
        return outside + " bytes outside the reservations' arenas, " + within + " bytes within them";
    }

    /** {@code figure} summed over the reservations' arenas. Under the lock. */
    private long inReservations(ToLongFunction<PoolArena> figure) {
        long sum = 0;
        for (PoolArena[] pair : reservedArenas.values()) {
            sum += figure.applyAsLong(pair[0]) + figure.applyAsLong(pair[1]);
        }
        return sum;
    }

    /** The largest free block of the shared arenas and the cache. Under the lock. */
    private long largestSharedFreeBlock() {
        long largest = cache.largestCached();
        for (PoolArena arena : shared) {
            largest = Math.max(largest, arena.largestFreeBlock());
        }
        return largest;
    }

    /**
     * The segments as they were at one moment: blocks the cache holds show as free, blocks whose device work completed
     * since the last allocate, free or trim as pending. After a close, what the pool kept (if device work did not
     * finish), else nothing. Read a stretch at a time ({@link PoolSnapshotReader}): however many blocks the pool has,
     * the lock is held for a fraction of a millisecond at a time.
     */
    @Override
    public List<MemorySnapshot.Segment> segments() {
        List<MemorySnapshot.Segment> segments = new ArrayList<>(new PoolSnapshotReader(this).read());
        segments.addAll(upstream.unfinishedSegments()); // out of the pool, still reserved: shown as the figures count them
        return segments;
    }

    /** Every segment with its blocks, walked under the lock, which the caller holds. */
    List<MemorySnapshot.Segment> walk() {
        List<MemorySnapshot.Segment> out = new ArrayList<>();
        for (PoolArena arena : walkOrder()) {
            arena.snapshot(out);
        }
        return out;
    }

    /** {@link #walk} under one hold of the lock, as {@link #segments} read the pool before it read in stretches. */
    List<MemorySnapshot.Segment> walkUnderLock() {
        lock.lock();
        try {
            return walk();
        } finally {
            lock.unlock();
        }
    }

    /** The segments and ranges of every arena, in the order {@link #walk} lists them. Under the lock. */
    void segmentsInto(List<PoolSegment> into) {
        for (PoolArena arena : walkOrder()) {
            arena.segmentsInto(into);
        }
    }

    /** The order a snapshot lists the arenas' segments in: small before large, the shared arenas first. */
    private List<PoolArena> walkOrder() {
        List<PoolArena> order = new ArrayList<>(List.of(small, large));
        for (PoolArena[] pair : reservedArenas.values()) {
            order.add(pair[0]);
            order.add(pair[1]);
        }
        return order;
    }

    /**
     * Bytes of blocks handed out or pending, in every arena: what the arenas lent, less what the size-class cache holds
     * of it. Counted, not walked: every refused request says it, and a pool of many small blocks that refuses request
     * after request walked them all each time, under the lock. Under the lock.
     */
    private long liveBytes() {
        long taken = 0;
        for (PoolArena arena : arenas) {
            taken += arena.takenBytes();
        }
        return taken - cache.cachedBytes();
    }

    /** Bytes every arena holds from the upstream (what other trims give back until they settle it included). Under the lock. */
    private long arenasReservedBytes() {
        long reserved = 0;
        for (PoolArena arena : arenas) {
            reserved += arena.reservedBytes();
        }
        return reserved;
    }

    ReentrantLock lock() {
        return lock;
    }

    /** How long a listener's read of this pool's blocks waits for its lock. */
    static final Duration LISTENER_READ_WAIT = Duration.ofSeconds(1);

    /**
     * Takes the lock for a read of the blocks (a snapshot). A listener, which may be told under another pool's lock,
     * waits for it at most {@link #LISTENER_READ_WAIT}: this pool's own listener may be reading that pool meanwhile,
     * and waiting for ever would hold both threads for ever.
     */
    void lockToRead() {
        if (lockedToRead()) {
            return;
        }
        throw new IllegalStateException("the " + location + " pool stayed busy while a listener read its blocks: a listener told "
                + "under another pool's lock waits for this one at most " + LISTENER_READ_WAIT.toMillis() + " ms, since this pool's "
                + "listener may be waiting for that one; read snapshots outside listeners");
    }

    /** {@link #lockToRead}, false where a listener's bounded wait ran out (the lock then not held). */
    boolean lockedToRead() {
        if (!UserCode.inListener() || lock.isHeldByCurrentThread()) {
            lock.lock();
            return true;
        }
        try {
            return lock.tryLock(LISTENER_READ_WAIT.toNanos(), TimeUnit.NANOSECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    MemoryEventListener events() {
        return events;
    }

    MemoryLocation location() {
        return location;
    }

    boolean isClosed() {
        return closed;
    }

    /** The blocks changed since a snapshot reader last took them, in the order changed, each as often as changed. Under the lock. */
    static final class ChangeLog {
        private ArrayList<PoolBlock> blocks = new ArrayList<>();
        /** Set by a reader that gave up without the lock to stop its log: the next holder stops it. */
        volatile boolean abandoned;

        /** The blocks logged since the last call, and an empty log from now on. */
        List<PoolBlock> take() {
            List<PoolBlock> taken = blocks;
            blocks = new ArrayList<>();
            return taken;
        }
    }

    /** Starts logging changed blocks for a snapshot reader (one log each). Under the lock. */
    ChangeLog startChangeLog() {
        ChangeLog log = new ChangeLog();
        ChangeLog[] logs = Arrays.copyOf(changes, changes.length + 1);
        logs[changes.length] = log;
        changes = logs;
        return log;
    }

    /** Stops a reader's log. Under the lock. */
    void stopChangeLog(ChangeLog log) {
        changes = Arrays.stream(changes).filter(other -> other != log).toArray(ChangeLog[]::new);
    }

    /**
     * Logs a block whose place, size or state changed, or a free block whose pages were mapped or unmapped, while
     * snapshot readers run. Under the lock; the slow path only (the fast path's cache changes no block's place).
     */
    void touched(PoolBlock block) {
        boolean abandoned = false;
        for (ChangeLog log : changes) {
            log.blocks.add(block);
            abandoned |= log.abandoned;
        }
        if (abandoned) {
            changes = Arrays.stream(changes).filter(log -> !log.abandoned).toArray(ChangeLog[]::new);
        }
    }

    private void ensureOpen() {
        if (closed) {
            throw new IllegalStateException(location + " memory pool is closed");
        }
    }

    /**
     * Frees every segment and closes the upstream, once device work that blocks freed under it still wait on has finished. A pool whose work
     * does not finish within the device wait timeout keeps its segments rather than unmap memory a kernel still
     * uses (and says so in the log), and leaves the upstream open: the memory then goes back with the process.
     */
    @Override
    public void close() {
        lock.lock();
        try {
            if (closed) {
                return;
            }
            closed = true;
            if (!awaitTrims(System.nanoTime() + deviceWaitTimeout.toNanos())) {
                // what those trims give back is the backend's call's still: freeing the rest would free it a second time
                System.getLogger(CachingPoolResource.class.getName()).log(System.Logger.Level.WARNING, this + ": a trim's call"
                        + " into the backend had not returned within " + deviceWaitTimeout.toMillis() + " ms; the pool keeps its "
                        + upstream.reservedBytes() + " reserved bytes rather than free them under it");
                return;
            }
            if (!pending.isEmpty() && !DeviceWork.awaitAll(new ArrayList<>(pending.values()), System.nanoTime() + deviceWaitTimeout.toNanos())) {
                System.getLogger(CachingPoolResource.class.getName()).log(System.Logger.Level.WARNING, this + ": device work that "
                        + pending.size() + " freed block(s) wait on did not finish within " + deviceWaitTimeout.toMillis()
                        + " ms; the pool keeps its " + upstream.reservedBytes() + " reserved bytes rather than free them under it");
                return;
            }
            cache.close(block -> { });
            pending.clear();
            completed.clear();
            try {
                closeArenas(0);
            } finally {
                upstream.close();
            }
        } finally {
            lock.unlock();
        }
    }

    /** Closes the arenas from the {@code from}th on, each whatever the ones before it threw. Under the lock. */
    private void closeArenas(int from) {
        if (from == arenas.size()) {
            return;
        }
        try {
            arenas.get(from).close();
        } finally {
            closeArenas(from + 1);
        }
    }

    @Override
    public String toString() {
        return location + " caching pool (" + (expandable() ? "expandable ranges" : "plain segments") + ")";
    }
}
