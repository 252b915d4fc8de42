package dev.compute.memory.budget;

import dev.compute.memory.BudgetSpec;
import dev.compute.memory.BudgetStatistics;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.internal.ThreadStripes;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * One budget's entry in its {@link BudgetLedger}: its limits and reservation, what it and the budgets under it hold,
 * and the buffers allocated through it. The limits' books are guarded by the ledger's lock; the figures and the open
 * buffers are kept per thread stripe ({@link #cells}, see {@link BudgetStripes}).
 *
 * <p><b>Held, and occupied.</b> Per location, {@code content} is what counts against this budget's limits: the bytes
 * the ledger let in through it (buffers, requests under way, and room its stripes keep for the next requests) and, for
 * each child, what the child <em>occupies</em>: its content, or its reservation where that is more. A child's
 * reservation so counts in its parent as held from the moment the child is made, as Arrow allocates a child's
 * reservation from its parent. What this budget occupies in turn, {@code max(reserved, content)}, is what its parent
 * counts, and for a root what the {@link BudgetLedger} counts against the location's cap. {@code pending} is the part
 * of requests the ledger let in and the pool has not answered, through this budget and every budget under it.
 *
 * @param <B> the buffer handle the ledger keeps, to close what is still open when the budget closes
 */
public final class BudgetAccount<B> {

    static final int LOCATIONS = MemoryLocation.values().length;

    final @Nullable BudgetAccount<B> parent;
    final String name;
    final String path;
    final long limit;
    final long[] locationLimit = new long[LOCATIONS];
    /** The most room one stripe keeps per location: a sliver of the limit, so that parked room is little to take back. */
    final long[] keepMost = new long[LOCATIONS];
    /** Reservations; set to 0 as the budget closes, which gives them back to its parent or the cap. */
    final long[] reserved = new long[LOCATIONS];
    /**
     * The reservations the pool has yet to be found able to keep, by location ({@link BudgetLedger#keptByThePool}): the
     * books count them from the start, but the pool keeps no room for them until then, so that one it cannot keep (and
     * refuses as the budget is made) never takes room from the reservations that stand.
     */
    final boolean[] awaitingThePool = new boolean[LOCATIONS];
    /** Bytes let in through this budget itself: buffers, requests under way, its stripes' room. */
    final long[] direct = new long[LOCATIONS];
    /** {@link #direct} plus what each child occupies: what the limits count. */
    final long[] content = new long[LOCATIONS];
    final long[] pending = new long[LOCATIONS];
    /**
     * The part of {@link #pending} that requests let in from a budget's queue hold ({@code allocateAsync}): they may
     * wait for the pool's room as long as their callers allow, so a claim does not wait for them.
     */
    final long[] queuedPending = new long[LOCATIONS];
    long refusals;
    long mappedFiles;
    long mappedBytes;
    long waitingRequests;
    /** The children still open, in the order they were made. */
    final List<BudgetAccount<B>> children = new ArrayList<>();
    /** The mapped files through this budget itself not yet unmapped: a list through {@link BudgetEntry}. */
    @Nullable BudgetEntry<B> firstMapped;
    /** Written under the ledger's lock; read by the stripes' fast path, under a stripe's hold. */
    volatile boolean closed;
    /** Whether this budget or one above it reserves memory; set as it opens. */
    boolean underReservation;
    /** The figures and open buffers per thread stripe, each guarded by its stripe's hold. */
    @SuppressWarnings("unchecked") // an array of this handle's cells
    final @Nullable BudgetCells<B>[] cells = new BudgetCells[ThreadStripes.COUNT];
    /** Allocations the stripes counted before the manager freed its pools and the stripes' books went with them; under the stripes' holds. */
    long forgottenAllocations;
    /** Peaks per location, then of all locations together; written and read holding every stripe (see {@link BudgetStripes}). */
    final long[] peaks = new long[LOCATIONS + 1];
    /** The budget's public handle, for listing children; set once as it is made. */
    private @Nullable Object handle;

    BudgetAccount(@Nullable BudgetAccount<B> parent, BudgetSpec spec) {
        this.parent = parent;
        this.name = spec.name();
        this.path = parent == null ? spec.name() : parent.path + "/" + spec.name();
        this.limit = spec.limitBytes();
        for (MemoryLocation location : MemoryLocation.values()) {
            locationLimit[location.ordinal()] = spec.limitBytes(location);
            keepMost[location.ordinal()] = spec.limitBytes(location) / (2L * ThreadStripes.COUNT);
            reserved[location.ordinal()] = spec.reservedBytes(location);
        }
    }

    public String path() {
        return path;
    }

    public long limitBytes() {
        return limit;
    }

    public long limitBytes(MemoryLocation location) {
        return locationLimit[location.ordinal()];
    }

    /** The public handle given to {@link #attach}; null only while the budget is being made. */
    public @Nullable Object handle() {
        return handle;
    }

    /** Ties the public handle to this account, once, before anyone else can see it; under the ledger's lock (see {@link BudgetLedger#attach}). */
    void attach(Object handle) {
        if (this.handle != null) {
            throw new IllegalStateException("budget '" + path + "' already has a handle");
        }
        this.handle = handle;
    }

    /** What this budget takes of its parent's limits, or of the cap where it is a root: its content, or its reservation where more. */
    long occupied(int location) {
        return Math.max(reserved[location], content[location]);
    }

    long contentInAll() {
        return inAll(content);
    }

    long pendingInAll() {
        return inAll(pending);
    }

    long queuedPendingInAll() {
        return inAll(queuedPending);
    }

    /** Its figures, from what its stripes hold ({@code figures}); under the ledger's lock. */
    BudgetStatistics statistics(BudgetStripes.Figures figures) {
        Map<MemoryLocation, BudgetStatistics.Location> locations = new EnumMap<>(MemoryLocation.class);
        for (MemoryLocation location : MemoryLocation.values()) {
            int l = location.ordinal();
            if (figures.peaks()[l] > 0 || reserved[l] > 0 || locationLimit[l] < limit) {
                locations.put(location, new BudgetStatistics.Location(locationLimit[l], reserved[l], figures.used()[l], figures.peaks()[l]));
            }
        }
        return new BudgetStatistics(path, limit, figures.usedInAll(), figures.peaks()[BudgetCells.ALL], figures.buffers(),
                figures.allocations(), refusals, reservedInAll(), waitingRequests, mappedFiles, mappedBytes, locations);
    }

    long reservedInAll() {
        return inAll(reserved);
    }

    private static long inAll(long[] perLocation) {
        long sum = 0;
        for (long bytes : perLocation) {
            sum += bytes;
        }
        return sum;
    }

    /** Counts {@code files} mapped files (-1: one no more) of {@code bytes} each here and in every budget above. */
    void countMapped(int files, long bytes) {
        for (BudgetAccount<B> x = this; x != null; x = x.parent) {
            x.mappedFiles += files;
            x.mappedBytes += files * bytes;
        }
    }

    void link(BudgetEntry<B> entry) {
        entry.next = firstMapped;
        if (firstMapped != null) {
            firstMapped.previous = entry;
        }
        firstMapped = entry;
    }

    void unlink(BudgetEntry<B> entry) {
        if (entry.previous != null) {
            entry.previous.next = entry.next;
        } else if (firstMapped == entry) {
            firstMapped = entry.next;
        }
        if (entry.next != null) {
            entry.next.previous = entry.previous;
        }
        entry.previous = null;
        entry.next = null;
    }

    @Override
    public String toString() {
        return "BudgetAccount[" + path + "]";
    }
}
