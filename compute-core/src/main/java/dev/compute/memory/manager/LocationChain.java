package dev.compute.memory.manager;

import dev.compute.memory.MemoryEventListener;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemoryTimeline;
import dev.compute.memory.internal.ManagerLog;
import dev.compute.memory.internal.UserCode;
import dev.compute.memory.resource.BackendResource;
import dev.compute.memory.resource.Block;
import dev.compute.memory.resource.InspectableResource;
import dev.compute.memory.resource.MemoryResource;
import dev.compute.memory.resource.ReservedRoom;
import dev.compute.memory.resource.StatisticsResource;
import dev.compute.memory.resource.pool.CachingPoolResource;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.LongAdder;
import org.jspecify.annotations.Nullable;

/**
 * One location's resource chain (see {@link ChainBuilder} for its order) and the figures kept beside it: bytes moved
 * between host and device, and trims.
 */
public final class LocationChain {

    private static final System.Logger LOG = ManagerLog.logger();

    /** Whether the application's adaptors are in the chain, which decides whether blocks are checked and may move. */
    public enum Adaptors { NONE, COMPOSED }

    /** Where allocations and frees go: the recording adaptor at the top of the chain, or the statistics when recording is off. */
    final MemoryResource entry;
    /** The statistics adaptor, whose counts the figures read. */
    final StatisticsResource top;
    /** What holds memory and reports it: the pool, or the backend's resource when pooling is off. */
    final InspectableResource holding;
    final @Nullable CachingPoolResource pool;
    final BackendResource backend;
    final MemoryTimeline timeline;
    final boolean hostAccessible;
    final Adaptors adaptors;
    /** The smallest block compaction may move here ({@link #movable}); {@code Long.MAX_VALUE} where none may move. */
    private final long smallestMovable;
    final LongAdder hostToDevice = new LongAdder();
    final LongAdder deviceToHost = new LongAdder();
    final LongAdder deviceToDevice = new LongAdder();
    private final LongAdder trims = new LongAdder();
    /** Closed buffers' blocks that device work still uses, and their bytes: neither a buffer's nor free. */
    private final LongAdder heldByDeviceWork = new LongAdder();
    private final LongAdder blocksHeldByDeviceWork = new LongAdder();

    LocationChain(MemoryResource entry, StatisticsResource top, @Nullable CachingPoolResource pool, BackendResource backend,
                  MemoryTimeline timeline, boolean hostAccessible, Adaptors adaptors) {
        this.entry = entry;
        this.top = top;
        this.holding = pool != null ? pool : backend;
        this.pool = pool;
        this.backend = backend;
        this.timeline = timeline;
        this.hostAccessible = hostAccessible;
        this.adaptors = adaptors;
        this.smallestMovable = adaptors == Adaptors.NONE && pool != null ? pool.smallestMovableBytes() : Long.MAX_VALUE;
    }

    MemoryLocation location() {
        return backend.location();
    }

    /** True where host and device share this location's memory. */
    public boolean hostAccessible() {
        return hostAccessible;
    }

    /**
     * The largest request that memory given back could ever make room for: the pool's, which takes memory in whole pieces
     * ({@link CachingPoolResource#largestPossibleBytes}), or the backend's where pooling is off.
     */
    public long largestPossibleBytes() {
        return pool != null ? pool.largestPossibleBytes() : backend.largestPossibleBytes();
    }

    /**
     * The least a batch of {@code bytes}, {@code total} together, takes from the backend: in the pool's whole pieces
     * ({@link CachingPoolResource#leastTakenFor}), or {@code total} where pooling is off.
     */
    long leastTakenFor(long[] bytes, long total) {
        return pool != null ? pool.leastTakenFor(bytes) : total;
    }

    /** The whole pieces memory is taken from the backend in, as a message says them: the pool's; none where pooling is off. */
    String pieces() {
        return pool != null ? pool.pieces() : "bytes";
    }

    /**
     * Whether each block is checked before a buffer uses it: where the application's adaptors are in the chain, since
     * a block smaller than asked would let a buffer write over its neighbours.
     */
    boolean checksBlocks() {
        return adaptors == Adaptors.COMPOSED;
    }

    /**
     * Whether compaction may move a block of this chain: only the pool's, and not when the application's adaptors are
     * in it, since one may keep a block's place (as RMM's tracking adaptors key blocks by address) and would see it change.
     */
    boolean movable(Block block) {
        return mayMove(block.size()) && pool != null && pool.movable(block);
    }

    /**
     * False where a block for a request of {@code bytes} can never move: most requests answer here without looking at
     * their block. A request below the smallest movable size never gets a movable block, since the pool rounds sizes
     * up to its alignment, a divisor of that size's predecessor.
     */
    boolean mayMove(long bytes) {
        return bytes >= smallestMovable;
    }

    /** A reserving budget has closed: its pool's arenas for it go, with their memory, once they hold no block. */
    public void endReservation(Object reservation) {
        if (pool != null) {
            pool.endReservation(reservation);
        }
    }

    /** Keeps room under the location's cap for budgets' reservations (see {@link BackendResource#keepAside}). */
    public void keepAside(ReservedRoom reservations) {
        backend.keepAside(reservations);
    }

    /** See {@link BackendResource#keepAsideWhereItFits}. */
    long keepAsideWhereItFits(Runnable keep, Runnable withdraw) {
        return pool != null ? pool.withReservationsStill(() -> backend.keepAsideWhereItFits(keep, withdraw))
                : backend.keepAsideWhereItFits(keep, withdraw);
    }

    /** Gives cached memory beyond {@code keepBytes} back; told to listeners when something went. */
    long trim(long keepBytes, MemoryEventListener events) {
        // the frees the backend left unfinished first: the pool's trim may throw
        long finished = pool != null ? backend.finishUnfinishedFrees() : 0;
        long released = finished + holding.trim(keepBytes);
        trims.increment();
        if (released > 0) {
            events.trimmed(location(), released);
        }
        return released;
    }

    long trims() {
        return trims.sum();
    }

    /** A block device work holds ({@code +1}), or let go of ({@code -1}). */
    void heldByDeviceWork(Block block, int change) {
        heldByDeviceWork.add(change * block.size());
        blocksHeldByDeviceWork.add(change);
    }

    long heldByDeviceWork() {
        return Math.max(0, heldByDeviceWork.sum());
    }

    long blocksHeldByDeviceWork() {
        return Math.max(0, blocksHeldByDeviceWork.sum());
    }

    /**
     * Frees a block through the chain; what the chain throws (an application's adaptor may throw anything) is returned,
     * added to an earlier failure if there is one.
     */
    @Nullable Throwable deallocate(Block block, CompletableFuture<?> inFlight, @Nullable Throwable earlier) {
        try {
            entry.deallocate(block, inFlight);
            return earlier;
        } catch (Throwable e) {
            if (earlier == null) {
                return e;
            }
            UserCode.suppress(earlier, e);
            return earlier;
        }
    }

    /**
     * Closes the chain from its top, then what holds its memory: an application's adaptor that does not close its
     * upstream, or throws while closing, must not keep the pool's memory after the manager is gone. Closing twice is
     * harmless; the pool still keeps memory that device work may use.
     */
    void close() {
        try {
            top.close();
        } catch (Throwable e) {
            LOG.log(System.Logger.Level.ERROR, "closing the " + location() + " resource chain failed", e);
        }
        try {
            if (pool != null) {
                pool.close();
            } else {
                backend.close();
            }
        } catch (Throwable e) {
            LOG.log(System.Logger.Level.ERROR, "freeing the " + location() + " pool's memory failed", e);
        }
    }
}
