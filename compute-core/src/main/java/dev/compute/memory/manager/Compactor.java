package dev.compute.memory.manager;

import dev.compute.memory.CompactionReport;
import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.MemoryEventListener;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemoryStatistics;
import dev.compute.memory.internal.ManagerLog;
import dev.compute.memory.internal.UserCode;
import dev.compute.memory.lifetime.BufferCore;
import dev.compute.memory.lifetime.Relocation;
import dev.compute.memory.resource.Block;
import dev.compute.memory.resource.pool.CachingPoolResource;
import dev.compute.memory.spi.ComputeBackend;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import org.jspecify.annotations.Nullable;

/**
 * Compaction: moves the buffers nothing holds so that free space coalesces, then trims what emptied. It owns the
 * registry of what it may move (each movable block's buffer, entered as the buffer is made and removed before its
 * block goes back) and, per location, the count of changes to it that lets a compaction on out-of-memory that made no
 * room not be repeated until something changed. A move is one round trip: {@link Relocation#tryMove} takes the
 * buffer's monitor and asks the pool to relocate the block, copying the data within the device.
 */
public final class Compactor {

    private static final System.Logger LOG = ManagerLog.logger();

    /**
     * Bound while a host mirror is allocated. That happens under its buffer's monitor, and out-of-memory handlers and
     * listeners run within it: a compaction they start must not wait for other buffers' monitors, or two such threads
     * wait on each other's for ever.
     */
    private static final ScopedValue<Boolean> ALLOCATING_MIRROR = ScopedValue.newInstance();

    /** What compaction may move at one location, and how often that changed. */
    private static final class Movables {
        final Map<Block, BufferCore> buffers = new ConcurrentHashMap<>();
        /** Buffers entered and removed, and large host mirrors given back: what could move, or where to, changed. */
        final AtomicLong changes = new AtomicLong();
        /** The last compaction on out-of-memory that made no room; null before any did. */
        volatile @Nullable Fruitless fruitless;
    }

    /**
     * A compaction on out-of-memory that made no room: {@link Movables#changes} then, and the buffers it found held, whose
     * letting go may make room as much as a change does.
     */
    private record Fruitless(long changes, List<BufferCore> held) {

        boolean stillSo(long changesNow) {
            return changesNow == changes && held.stream().noneMatch(Relocation::letGo);
        }
    }

    /** A compaction's report, and the buffers it left where they were because something held them. */
    private record Compaction(CompactionReport report, List<BufferCore> held) {}

    private final LocationChains chains;
    private final CallGate gate;
    private final ComputeBackend backend;
    private final ManagerFigures figures;
    private final AllocationWaiters<?> waiters;
    private final MemoryEventListener events;
    private final long releaseThreshold;
    private final Duration deviceWaitTimeout;
    private final EnumMap<MemoryLocation, Movables> movables = new EnumMap<>(MemoryLocation.class);

    public Compactor(LocationChains chains, CallGate gate, ComputeBackend backend, ManagerFigures figures, AllocationWaiters<?> waiters,
              MemoryEventListener events, long releaseThreshold, Duration deviceWaitTimeout) {
        this.chains = chains;
        this.gate = gate;
        this.backend = backend;
        this.figures = figures;
        this.waiters = waiters;
        this.events = events;
        this.releaseThreshold = releaseThreshold;
        this.deviceWaitTimeout = deviceWaitTimeout;
        for (MemoryLocation location : MemoryLocation.values()) {
            movables.put(location, new Movables());
        }
    }

    /** A buffer was made over {@code block}: compaction may move it, where its chain lets blocks move. */
    public void entered(LocationChain chain, Block block, BufferCore buffer) {
        if (chain.mayMove(buffer.byteSize()) && chain.movable(block)) {
            Movables at = movables.get(chain.location());
            at.buffers.put(block, buffer);
            at.changes.incrementAndGet();
        }
    }

    /** {@code block} goes back: before the pool may hand it to another buffer, compaction forgets it. */
    void forget(LocationChain chain, Block block) {
        if (chain.movable(block)) {
            Movables at = movables.get(chain.location());
            at.buffers.remove(block);
            at.changes.incrementAndGet();
        }
    }

    /** A large host mirror never moves, but the place it gives back may let buffers there move. */
    void mirrorReturned(LocationChain chain, Block mirror) {
        if (chain.pool != null && chain.pool.movable(mirror)) {
            movables.get(chain.location()).changes.incrementAndGet();
        }
    }

    /** Runs {@code allocation} of a host mirror: a compaction it starts moves nothing (see {@link #ALLOCATING_MIRROR}). */
    <T> T allocatingMirror(Callable<T> allocation) throws Exception {
        return ScopedValue.where(ALLOCATING_MIRROR, true).call(allocation::call);
    }

    /**
     * The handler behind {@code compact-on-out-of-memory}: compacts the location where memory ran out and asks for one
     * more try where that moved a buffer or gave memory back. Waits for device work no longer than a compaction does. A
     * compaction that made no room is not repeated until a large buffer is allocated or closed there, or one it found in
     * use is let go (asked of those buffers alone), so that a caller that meets out-of-memory again and again (a
     * {@code tryAllocate} as back-pressure) does not walk the pool each time.
     */
    public boolean compactForRoom(MemoryLocation location, long requestedBytes, int attempt, DeviceOutOfMemoryException failure) {
        if (ALLOCATING_MIRROR.isBound()) {
            // a mirror may move nothing (see ALLOCATING_MIRROR): no compaction was tried, so none is marked fruitless
            return false;
        }
        chains.open(location);
        Movables at = movables.get(location);
        long changes = at.changes.get();
        Fruitless last = at.fruitless;
        if (last != null && last.stillSo(changes)) {
            return false;
        }
        Compaction compaction;
        try {
            compaction = compact(location, System.nanoTime() + deviceWaitTimeout.toNanos());
        } catch (RuntimeException e) {
            if (gate.isClosed()) {
                throw e;
            }
            // the pool's own try at room, not the caller's: a move that failed (a copy the device refused) left its
            // buffer where it was, and the allocation fails as out of memory, which tryAllocate and waiters expect
            LOG.log(System.Logger.Level.WARNING, "the compaction of " + location + " on out-of-memory failed", e);
            failure.addSuppressed(e);
            return false;
        }
        CompactionReport report = compaction.report();
        boolean room = report.buffersMoved() > 0 || report.bytesReleased() > 0;
        if (!room) {
            at.fruitless = new Fruitless(changes, compaction.held());
        }
        return room;
    }

    /** Every location, with device work at every location waited for together. */
    public List<CompactionReport> compactAll() {
        long waitUntil = System.nanoTime() + deviceWaitTimeout.toNanos();
        List<CompactionReport> reports = new ArrayList<>(chains.locations().size());
        for (MemoryLocation location : chains.locations()) {
            reports.add(compact(location, waitUntil).report());
        }
        return reports;
    }

    public CompactionReport compact(MemoryLocation location) {
        return compact(location, System.nanoTime() + deviceWaitTimeout.toNanos()).report();
    }

    /**
     * Tries the pool's live blocks in its compaction order; each whose buffer is known (a movable block) moves under
     * that buffer's monitor, into a place the pool holds, with a copy within the device. Then trims. Device work in
     * flight on the buffers, all of them together, is waited for until {@code waitUntil} ({@link System#nanoTime()}).
     */
    private Compaction compact(MemoryLocation location, long waitUntil) {
        int stripe = gate.enterAlways();
        try {
            LocationChain chain = chains.open(location);
            long start = System.nanoTime();
            MemoryStatistics before = figures.statistics(location);
            CachingPoolResource pool = chain.pool;
            if (pool == null) {
                // a location without a pool: nothing to move, nothing held beyond live memory
                return new Compaction(new CompactionReport(location, 0, 0, 0, 0, before.reservedBytes(), before.reservedBytes(),
                        before.largestFreeBlockBytes(), before.largestFreeBlockBytes(), before.fragmentation(), before.fragmentation(),
                        Duration.ofNanos(System.nanoTime() - start)), List.of());
            }
            Map<Block, BufferCore> known = movables.get(location).buffers;
            long moved = 0;
            long bytesMoved = 0;
            long inUse = 0;
            List<BufferCore> held = new ArrayList<>();
            long[] releasedByMoves = {0};
            List<Block> order = ALLOCATING_MIRROR.isBound() ? List.of() : pool.compactionOrder(); // moves none, trims
            for (Block block : order) {
                BufferCore buffer = known.get(block);
                if (buffer == null || gate.isClosed()) {
                    continue;
                }
                Relocation.Move move = Relocation.tryMove(buffer, (own, data) -> {
                    long released = pool.relocateReleasing(own, (from, to) -> {
                        if (data == Relocation.Data.KEEP) {
                            backend.copyWithinDevice(from.segment(), from.offset(), to.segment(), to.offset(), from.size());
                        }
                    });
                    releasedByMoves[0] += Math.max(0, released); // pages a move unmapped at the old place went back too
                    return released >= 0;
                }, waitUntil);
                switch (move) {
                    case MOVED -> {
                        moved++;
                        bytesMoved += block.size();
                    }
                    case IN_USE -> {
                        inUse++;
                        held.add(buffer);
                    }
                    case WORK_PENDING -> inUse++; // waited for once already: its work's end is no reason to walk again
                    case NO_PLACE -> { }
                }
            }
            long released = releasedByMoves[0] + (gate.isClosed() ? 0 : chain.trim(releaseThreshold, events));
            if (moved > 0) {
                // free space coalesced, and what emptied was given back under the cap: a waiting request may fit now
                waiters.released(location, CompletableFuture.completedFuture(null));
            }
            MemoryStatistics after = figures.statistics(location);
            CompactionReport report = new CompactionReport(location, moved, bytesMoved, inUse, released,
                    before.reservedBytes(), after.reservedBytes(), before.largestFreeBlockBytes(), after.largestFreeBlockBytes(),
                    before.fragmentation(), after.fragmentation(), Duration.ofNanos(System.nanoTime() - start));
            if (!UserCode.inListener()) {
                // one asked from a listener moves nothing (see compactionOrder), and telling listeners of it would call the
                // one that asked again, inside itself: a listener that compacts on hearing of a compaction recursed until
                // the stack overflowed
                events.compacted(report);
            }
            return new Compaction(report, held);
        } finally {
            gate.exitQuietly(stripe);
        }
    }
}
