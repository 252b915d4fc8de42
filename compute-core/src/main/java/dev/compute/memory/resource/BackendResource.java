package dev.compute.memory.resource;

import dev.compute.memory.internal.SafeEventListener;
import dev.compute.memory.internal.UserCode;
import dev.compute.memory.AllocationAboveLimitException;
import dev.compute.memory.DeviceMemoryInfo;
import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.MemoryEventListener;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemorySnapshot;
import dev.compute.memory.OutOfMemoryReason;
import dev.compute.memory.spi.BackendOutOfMemoryException;
import dev.compute.memory.spi.ComputeBackend;
import dev.compute.memory.spi.FreeUnfinishedException;
import dev.compute.memory.spi.NativeAllocation;
import dev.compute.memory.spi.VirtualMemory;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.ToLongFunction;
import org.jspecify.annotations.Nullable;

/**
 * A location's memory straight from the backend: the upstream every chain ends in, and the one place that calls
 * the backend, counts what is held and enforces the location's cap. Each allocation is a whole backend
 * allocation and each free gives it straight back (once device work on it has finished); where the backend maps
 * pages, {@link #pageMapping()} lends the same ledger and cap to a pool's expandable ranges. Alone it is what
 * {@code pooling.enabled=false} gets; under {@link dev.compute.memory.resource.pool.CachingPoolResource} it is
 * where the pool's segments and pages come from.
 *
 * <p>Figures: reserved bytes are whole allocations plus mapped pages (reserved address ranges cost nothing and
 * are not counted), exact at every moment; {@link #backendAllocations()} counts allocations and page maps,
 * {@link #backendFrees()} frees and unmaps. Each backend call is timed for the {@link MemoryEventListener}.
 *
 * <p>Thread-safe: the ledger is guarded by this object's monitor, and so are the backend's allocations and maps (uncontended
 * under a pool, whose own lock is held around them); frees and unmaps are called without it (but for the close's), their
 * memory taken out of the ledger's reach first, so that a hung driver's free holds up no other call. Figures are read
 * without it.
 */
public final class BackendResource implements MemoryResource, InspectableResource {

    private final ComputeBackend backend;
    private final MemoryLocation location;
    private final long limitBytes;
    private final long maxAllocationBytes;
    private final String limitProperty;
    private final LimitRefusals limits;
    private final Duration deviceWaitTimeout;
    private final MemoryEventListener events;
    private final @Nullable PageMapping pageMapping;
    private final Map<NativeAllocation, WholeAllocation> live = new HashMap<>();
    private final Map<NativeAllocation, CompletableFuture<?>> pending = new ConcurrentHashMap<>();
    /** Taken out of {@link #live} while the backend frees them (under the monitor): still reserved, so still shown. */
    private final Map<NativeAllocation, WholeAllocation> freeing = new HashMap<>();
    /** Freed allocations the backend did not take back (a pool keeps those whose free was refused as its own). */
    private final FailedFrees failed = new FailedFrees();
    private volatile long reserved;
    private volatile long reservedPeak;
    /** The room budgets' reservations keep under the limit, which no other request may grow into. */
    private final KeptAside keptAside = new KeptAside();
    private volatile int segments;
    private volatile long allocations;
    private volatile long frees;
    private volatile long pageMaps;
    private volatile long pageUnmaps;
    private volatile long rangeCalls;
    private volatile boolean closed;

    /**
     * @param limitBytes     the most this location may hold from the backend
     * @param limitProperty  the setting that gave {@code limitBytes}, named in out-of-memory messages
     * @param deviceWaitTimeout how long {@link #close()} waits for device work on memory freed under it
     */
    public BackendResource(ComputeBackend backend, MemoryLocation location, long limitBytes, String limitProperty,
                           Duration deviceWaitTimeout, MemoryEventListener events) {
        if (limitBytes <= 0) {
            throw new IllegalArgumentException("limitBytes must be positive: " + limitBytes);
        }
        this.backend = backend;
        this.location = location;
        this.limitBytes = limitBytes;
        this.maxAllocationBytes = backend.maxAllocationBytes(location);
        this.limitProperty = limitProperty;
        this.limits = new LimitRefusals(location, limitBytes, maxAllocationBytes, limitProperty);
        this.deviceWaitTimeout = deviceWaitTimeout;
        this.events = SafeEventListener.guard(events);
        VirtualMemory pages = backend.virtualMemory(location).orElse(null);
        this.pageMapping = pages == null ? null : new PageMapping(this, pages);
    }

    record WholeAllocation(NativeAllocation segment, long requestedSize) implements Block {
        @Override
        public long offset() {
            return 0;
        }

        @Override
        public long size() {
            return segment.sizeBytes();
        }
    }

    public MemoryLocation location() {
        return location;
    }

    /** The backend's page mapping, under this resource's ledger and cap; null where the backend does not map pages. */
    public @Nullable PageMapping pageMapping() {
        return pageMapping;
    }

    /** The most this location may hold. */
    public long limitBytes() {
        return limitBytes;
    }

    /**
     * The largest request that memory given back could ever make room for: the limit, or the backend's largest single
     * allocation ({@link ComputeBackend#maxAllocationBytes}) where that is smaller. {@link LimitRefusals#aboveLimit}
     * refuses larger ones.
     */
    public long largestPossibleBytes() {
        return Math.min(limitBytes, maxAllocationBytes);
    }

    /** True when {@code moreBytes} more would stay within the limit, less what is kept for budgets' reservations. */
    public boolean fits(long moreBytes) {
        return reserved + moreBytes <= limitBytes - keptAsideBytes();
    }

    /**
     * What the limit keeps out of the calling thread's reach now: each reservation beyond the live memory a pool holds
     * apart for it ({@link #countLiveForReservations}), but the one the request is made under ({@link KeptAside}).
     */
    public long keptAsideBytes() {
        return keptAside.bytes();
    }

    /**
     * Keeps room for a budget's new reservation where it fits beside the memory held here and the room kept for the
     * others: {@code keep} makes it one of those {@link #keepAside} answers (a child's, in the room of the reserving
     * budget above it, which may grow), and {@code withdraw} undoes that where the memory held and the room kept then
     * pass the limit. Returns by how much they did; 0 where it is kept. Under the monitor every growth holds from its
     * {@link #fits} check until its memory is counted, so that no growth sees it withdrawn, nor passes between the check
     * and the keeping.
     */
    public synchronized long keepAsideWhereItFits(Runnable keep, Runnable withdraw) {
        keep.run();
        long shortfall = Math.max(0, reserved + keptAsideBytes() - limitBytes);
        if (shortfall > 0) {
            withdraw.run();
        }
        return shortfall;
    }

    /** Keeps room under the limit for budgets' reservations, as they stand at each growth (see {@link #keptAsideBytes}). */
    public void keepAside(ReservedRoom reservations) {
        keptAside.keepFor(reservations);
    }

    /**
     * The key of the reservation the calling thread's request is made under (a pool serves it from memory kept apart for
     * that reservation); null for a request under none.
     */
    public @Nullable Object reservingBudget() {
        return keptAside.reservingBudget();
    }

    /** Whether the reservation of key {@code reservation} stands: a request under one whose budget has closed is anyone's. */
    public boolean reservationStands(Object reservation) {
        return keptAside.stands(reservation);
    }

    /** For the pool over this resource: the live memory it holds apart for each reservation, by its key. */
    public void countLiveForReservations(ToLongFunction<Object> live) {
        keptAside.liveIn(live);
    }

    /** The device's memory as the backend reports it now (a driver call on some backends). */
    public DeviceMemoryInfo memoryInfo() {
        return backend.memoryInfo();
    }

    // ---- allocation -------------------------------------------------------------------------------------------

    /** A whole backend allocation of {@code bytes}; refused from within a listener, before this resource's lock is taken. */
    @Override
    public Block allocate(long bytes) {
        UserCode.refuseInListener(location);
        return allocateLocked(bytes);
    }

    private synchronized Block allocateLocked(long bytes) {
        if (bytes <= 0) {
            throw new IllegalArgumentException("allocation size must be positive: " + bytes + " bytes");
        }
        ensureOpen();
        if (bytes > largestPossibleBytes()) {
            throw limits.aboveLimit(bytes, bytes);
        }
        if (!fits(bytes)) {
            throw limitReached(bytes);
        }
        long start = System.nanoTime();
        NativeAllocation allocation;
        try {
            allocation = backend.allocate(location, bytes);
        } catch (BackendOutOfMemoryException e) {
            throw deviceRefused(bytes, e);
        }
        long nanos = System.nanoTime() - start;
        WholeAllocation block = new WholeAllocation(allocation, bytes);
        live.put(allocation, block);
        allocations++;
        segments++;
        add(allocation.sizeBytes());
        events.backendAllocated(location, allocation.sizeBytes(), nanos);
        return block;
    }

    /** The refusals of requests no release of memory can make room for: above this location's limits. */
    public LimitRefusals limits() {
        return limits;
    }

    /** Under the monitor. */
    DeviceOutOfMemoryException limitReached(long bytes) {
        long kept = keptAsideBytes();
        return refusal(OutOfMemoryReason.POOL_LIMIT, bytes, "would take the " + reserved + " bytes reserved past " + limitProperty
                + " (" + limitBytes + " bytes)" + (kept > 0 ? " less the " + kept + " bytes kept for budgets' reservations not in use" : ""));
    }

    /** Under the monitor. */
    DeviceOutOfMemoryException deviceRefused(long bytes, BackendOutOfMemoryException refusal) {
        return refusal(OutOfMemoryReason.DEVICE_MEMORY, bytes, "were refused by the backend, with " + reserved + " bytes reserved ("
                + limitProperty + " " + limitBytes + " bytes); the backend said: " + refusal.getMessage());
    }

    /**
     * The one out-of-memory message of a chain: what was asked, what stopped it, and the device's free memory.
     * A pool over this resource puts its own figures (live, cached, largest free block) before it.
     */
    private DeviceOutOfMemoryException refusal(OutOfMemoryReason reason, long bytes, String why) {
        return new DeviceOutOfMemoryException(location, bytes, reason, "out of " + location + " memory: " + bytes + " more bytes "
                + why + "; " + deviceMemory(backend.memoryInfo()));
    }

    /** The device's free memory as the backend tells it; -1 is a figure it cannot tell (OpenCL's free memory), not one to print. */
    private static String deviceMemory(DeviceMemoryInfo device) {
        if (device.freeBytes() >= 0) {
            return "device free " + device.freeBytes() + " of " + device.totalBytes() + " bytes";
        }
        return "the backend does not report the device's free memory" + (device.totalBytes() >= 0 ? " (of " + device.totalBytes() + " bytes)" : "");
    }

    // ---- freeing ----------------------------------------------------------------------------------------------

    /** The allocation goes back once {@code inFlight} completes. */
    @Override
    public void deallocate(Block block, CompletableFuture<?> inFlight) {
        free(block, inFlight);
    }

    /**
     * As {@link #deallocate(Block)}; false where the memory did not go back: the backend left its free unfinished (kept
     * reserved, out of use, for a trim to finish), or this resource is closed.
     */
    public boolean deallocateNow(Block block) {
        return free(block, CompletableFuture.completedFuture(null));
    }

    /** True where the allocation went back now. */
    private boolean free(Block block, CompletableFuture<?> inFlight) {
        if (closed) {
            return false;
        }
        NativeAllocation segment = block.segment();
        WholeAllocation whole;
        synchronized (this) {
            WholeAllocation refusedBefore = inFlight.isDone() ? failed.takeRefused(segment, block) : null;
            if (refusedBefore != null) { // a free the backend refused before, tried again
                whole = refusedBefore;
                freeing.put(segment, whole);
            } else if (!(block instanceof WholeAllocation) || live.get(segment) != block || pending.containsKey(segment)) {
                throw new IllegalArgumentException("this block was not allocated by this resource, or was freed already: " + block);
            } else if (!inFlight.isDone()) {
                pending.put(segment, inFlight);
                whole = null;
            } else {
                whole = live.remove(segment);
                freeing.put(segment, whole);
            }
        }
        if (whole != null) {
            return free(whole, true);
        }
        inFlight.whenComplete((result, failure) -> freePending(segment, inFlight));
        return false;
    }

    /** Keeps an allocation whose free the backend left unfinished reserved, out of use, and says so. */
    private void keepUnfinished(WholeAllocation whole, Throwable why) {
        synchronized (this) {
            freeing.remove(whole.segment());
            failed.unfinished(whole);
        }
        System.getLogger(BackendResource.class.getName()).log(System.Logger.Level.WARNING, this + ": the backend did not finish"
                + " the free of " + whole.size() + " bytes (" + why.getMessage() + "); they stay reserved, out of use, until a"
                + " trim or the close frees them");
    }

    /**
     * Tries again the frees the backend left unfinished; returns the bytes given back. One it leaves unfinished again, or
     * refuses, stays reserved for the next try.
     */
    public long finishUnfinishedFrees() {
        List<WholeAllocation> retried;
        synchronized (this) {
            retried = failed.takeUnfinished();
            for (WholeAllocation whole : retried) { // taken out, as a free under way, so that no other trim frees it too
                freeing.put(whole.segment(), whole);
            }
        }
        long released = 0;
        for (WholeAllocation whole : retried) {
            if (free(whole, false)) {
                released += whole.size();
            }
        }
        return released;
    }

    /** Bytes of allocations whose free the backend left unfinished: reserved, and no cache. */
    public long unfinishedFreeBytes() {
        return failed.unfinishedBytes();
    }

    private void freePending(NativeAllocation segment, CompletableFuture<?> work) {
        WholeAllocation whole;
        synchronized (this) {
            if (closed || !pending.remove(segment, work)) {
                return;
            }
            whole = live.remove(segment);
            if (whole != null) {
                freeing.put(segment, whole);
            }
        }
        if (whole != null) {
            free(whole);
        }
    }

    /**
     * Has the backend free an allocation taken out of {@link #live}, then settles the ledger. The call is made without
     * the monitor: a slow or hung driver's free holds up no other allocation, nor the figures read under it.
     */
    private void free(WholeAllocation whole) {
        free(whole, true);
    }

    /**
     * As {@link #free(WholeAllocation)}; true where the memory went back. A free the backend leaves unfinished, or refuses
     * memory that is no longer {@code usable}, is kept out of use ({@link #keepUnfinished}) and not thrown: the caller
     * could only hand it out again.
     */
    private boolean free(WholeAllocation whole, boolean usable) {
        NativeAllocation segment = whole.segment();
        long start = System.nanoTime();
        try {
            backend.free(segment);
        } catch (FreeUnfinishedException unusable) {
            keepUnfinished(whole, unusable);
            return false;
        } catch (RuntimeException | Error refused) {
            if (!usable) {
                keepUnfinished(whole, refused);
                return false;
            }
            synchronized (this) {
                freeing.remove(segment);
                failed.refused(whole); // the backend kept it: reserved and free, for a later free, trim or the close to try again
            }
            throw refused;
        }
        long nanos = System.nanoTime() - start;
        synchronized (this) {
            freeing.remove(segment);
            frees++;
            segments--;
            remove(segment.sizeBytes());
        }
        events.backendFreed(location, segment.sizeBytes(), nanos);
        return true;
    }

    // ---- the ledger, shared with page mapping (under the monitor) ----------------------------------------------

    void add(long bytes) {
        long now = reserved + bytes;
        reserved = now;
        if (now > reservedPeak) {
            reservedPeak = now;
        }
    }

    void remove(long bytes) {
        reserved -= bytes;
    }

    void rangeReserved() {
        rangeCalls++;
        segments++;
    }

    void rangeReleased() {
        rangeCalls++;
        segments--;
    }

    void pagesMapped(long bytes, long nanos) {
        pageMaps++;
        add(bytes);
        events.backendAllocated(location, bytes, nanos);
    }

    void pagesUnmapped(long bytes, long nanos) {
        pageUnmaps++;
        remove(bytes);
        events.backendFreed(location, bytes, nanos);
    }

    void ensureOpen() {
        if (closed) {
            throw new IllegalStateException(location + " memory resource is closed");
        }
    }

    // ---- figures ------------------------------------------------------------------------------------------------

    @Override
    public long reservedBytes() {
        return reserved;
    }

    @Override
    public long reservedBytesPeak() {
        return reservedPeak;
    }

    @Override
    public int segmentCount() {
        return segments;
    }

    /** Nothing is cached here but what the backend refused to take back. */
    @Override
    public synchronized long largestFreeBlockBytes() {
        return failed.largestRefused();
    }

    /** Calls that gave memory: allocations and page maps. */
    public long backendAllocations() {
        return allocations + pageMaps;
    }

    /** Calls that gave memory back: frees and page unmaps. */
    public long backendFrees() {
        return frees + pageUnmaps;
    }

    /** Every backend call that changed what is held, address-range reservations and releases included. */
    public long backendCalls() {
        return backendAllocations() + backendFrees() + rangeCalls;
    }

    /** The whole allocations held, each one live block (page-mapped ranges are the pool's to show). */
    @Override
    public synchronized List<MemorySnapshot.Segment> segments() {
        List<MemorySnapshot.Segment> out = new ArrayList<>();
        for (WholeAllocation b : live.values()) {
            MemorySnapshot.BlockState state = pending.containsKey(b.segment()) ? MemorySnapshot.BlockState.PENDING : MemorySnapshot.BlockState.LIVE;
            out.add(new MemorySnapshot.Segment(b.segment().address(), b.size(), false,
                    List.of(new MemorySnapshot.Block(0, b.size(), state, b.requestedSize(), null))));
        }
        // Reserved counts these until the backend returns: the segments must too.
        for (WholeAllocation b : freeing.values()) {
            out.add(FailedFrees.segmentOf(b, MemorySnapshot.BlockState.RELEASING));
        }
        failed.addSegments(out, true);
        return out;
    }

    /** The allocations whose free the backend left unfinished, each a segment of one RELEASING block, for a pool's snapshot. */
    public synchronized List<MemorySnapshot.Segment> unfinishedSegments() {
        List<MemorySnapshot.Segment> out = new ArrayList<>();
        failed.addSegments(out, false);
        return out;
    }

    /**
     * Tries again the frees the backend left unfinished (whatever {@code keepBytes}) and those it refused, beyond
     * {@code keepBytes}; throws the first refusal, after trying all. Nothing else is cached here. Called where no pool is
     * above this resource: a pool keeps the allocations whose free was refused, and tries again itself.
     */
    @Override
    public long trim(long keepBytes) {
        long finished = finishUnfinishedFrees();
        List<WholeAllocation> retries;
        synchronized (this) {
            retries = failed.takeRefusedBeyond(keepBytes);
            for (WholeAllocation whole : retries) {
                freeing.put(whole.segment(), whole);
            }
        }
        return finished + freeEach(retries);
    }

    /**
     * Frees each of {@code wholes}, out of the books already; one the backend refuses (kept again by {@link #free}) stops
     * no other. Returns the bytes given back; throws the first failure after trying all, the others suppressed in it.
     */
    private long freeEach(List<WholeAllocation> wholes) {
        long released = 0;
        Throwable failure = null;
        for (WholeAllocation whole : wholes) {
            try {
                free(whole);
                released += whole.size();
            } catch (RuntimeException | Error refused) {
                if (failure == null) {
                    failure = refused;
                } else if (failure != refused) {
                    failure.addSuppressed(refused);
                }
            }
        }
        if (failure instanceof Error e) {
            throw e;
        }
        if (failure instanceof RuntimeException e) {
            throw e;
        }
        return released;
    }

    /**
     * Frees every allocation still held, once device work on those freed under it has finished; if it does not
     * within the device wait timeout, keeps them all (the memory goes back with the process) and says so.
     */
    @Override
    public void close() {
        List<CompletableFuture<?>> inFlight;
        synchronized (this) {
            if (closed) {
                return;
            }
            inFlight = new ArrayList<>(pending.values());
        }
        boolean idle = DeviceWork.awaitAll(inFlight, System.nanoTime() + deviceWaitTimeout.toNanos());
        synchronized (this) {
            closed = true;
            if (!idle) {
                System.getLogger(BackendResource.class.getName()).log(System.Logger.Level.WARNING, this + ": device work on "
                        + pending.size() + " freed allocation(s) did not finish within " + deviceWaitTimeout.toMillis()
                        + " ms; " + reserved + " reserved bytes are kept rather than freed under it");
                return;
            }
            pending.clear();
            finishUnfinishedFrees();
            List<WholeAllocation> held = new ArrayList<>(live.values());
            held.addAll(failed.takeRefusedBeyond(0));
            live.clear();
            freeEach(held);
        }
    }

    @Override
    public String toString() {
        return location + " backend memory (" + limitProperty + " " + limitBytes + " bytes)";
    }
}
