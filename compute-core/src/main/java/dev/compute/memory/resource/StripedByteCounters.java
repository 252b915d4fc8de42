package dev.compute.memory.resource;

import dev.compute.memory.internal.StripedLongs;
import dev.compute.memory.internal.ThreadStripes;

/**
 * Allocated and requested bytes in use with their peaks, and the counts of allocations and frees, kept so that
 * threads allocating at once do not write one shared cache line on every call (which made a pair on two
 * threads several times slower than on one), with peaks that stay exact whichever thread frees what another
 * allocated.
 *
 * <p>Each byte figure keeps its peak, and each thread stripe ({@link ThreadStripes}) holds <em>headroom</em>:
 * bytes its threads may allocate without passing the peak. At every moment {@code current + Σ headroom = peak},
 * so the current figure is not counted anywhere: it is read as {@code peak − Σ headroom}. A free adds its
 * bytes to its stripe's headroom; an allocation takes them from its stripe's headroom: one atomic step on the
 * thread's own cache line. Only when its stripe has too little does an allocation take the lock and collect
 * every stripe's headroom; if all of it is still too little, the new figure is higher than any before it, and
 * the peak is raised to it. So a thread that frees what it allocated (a step's tensors, a request's buffers)
 * stays on its own line. From a stripe that has not allocated since the last collection (a thread that frees
 * what others allocate) the collector takes all, so a producer collects its consumer's frees in batches; from
 * one that has, only what it still lacks, so that two threads working alike settle with the headroom each
 * needs rather than take it from each other in turns.
 *
 * <p>How exact: figures read while no call is under way are exact, peaks included, whichever threads allocated
 * and freed. A call under way while they are read may be missed or counted in part. A free that runs while
 * another thread raises the peak counts as if it came after that allocation.
 */
final class StripedByteCounters {

    /** Headroom of allocated bytes, per stripe. */
    private static final int ALLOCATED = 0;
    /** Headroom of requested bytes, per stripe. */
    private static final int REQUESTED = 1;
    private static final int ALLOCATIONS = 2;
    private static final int FREES = 3;

    private final StripedLongs stripes = new StripedLongs();
    /** The peaks of ALLOCATED and REQUESTED; under this object's lock. */
    private final long[] peaks = new long[2];
    /** Per figure and stripe, the stripe's allocations when the figure was last collected; under this object's lock. */
    private final long[][] allocationsAtCollection = new long[2][ThreadStripes.COUNT];

    void allocated(long allocatedBytes, long requestedBytes) {
        int stripe = ThreadStripes.ofCurrentThread();
        take(stripe, ALLOCATED, allocatedBytes);
        take(stripe, REQUESTED, requestedBytes);
        stripes.addAt(stripe, ALLOCATIONS, 1);
    }

    void freed(long allocatedBytes, long requestedBytes) {
        int stripe = ThreadStripes.ofCurrentThread();
        stripes.addAt(stripe, ALLOCATED, allocatedBytes);
        stripes.addAt(stripe, REQUESTED, requestedBytes);
        stripes.addAt(stripe, FREES, 1);
    }

    /** Takes {@code bytes} of headroom from the stripe, collecting (or raising the peak) when it has too little. */
    private void take(int stripe, int field, long bytes) {
        long headroom = stripes.get(stripe, field);
        while (headroom >= bytes) {
            long seen = stripes.compareAndExchange(stripe, field, headroom, headroom - bytes);
            if (seen == headroom) {
                return;
            }
            headroom = seen;
        }
        collect(stripe, field, bytes);
    }

    private synchronized void collect(int stripe, int field, long bytes) {
        long collected = takeAll(stripe, field);
        long[] allocationsBefore = allocationsAtCollection[field];
        boolean[] allocating = new boolean[ThreadStripes.COUNT];
        for (int s = 0; s < ThreadStripes.COUNT; s++) {
            long allocations = stripes.get(s, ALLOCATIONS);
            allocating[s] = allocations != allocationsBefore[s];
            allocationsBefore[s] = allocations;
            if (s != stripe && !allocating[s]) {
                collected += takeAll(s, field);
            }
        }
        for (int s = 0; s < ThreadStripes.COUNT && collected < bytes; s++) {
            if (s != stripe && allocating[s]) {
                collected += takeUpTo(s, field, bytes - collected);
            }
        }
        if (collected < bytes) {
            peaks[field] += bytes - collected; // no headroom left anywhere: current is the new peak
        } else {
            stripes.addAt(stripe, field, collected - bytes);
        }
    }

    private long takeAll(int stripe, int field) {
        return takeUpTo(stripe, field, Long.MAX_VALUE);
    }

    /** Takes up to {@code most} bytes of a stripe's headroom; returns how many it took. */
    private long takeUpTo(int stripe, int field, long most) {
        long headroom = stripes.get(stripe, field);
        while (headroom > 0) {
            long taken = Math.min(headroom, most);
            long seen = stripes.compareAndExchange(stripe, field, headroom, headroom - taken);
            if (seen == headroom) {
                return taken;
            }
            headroom = seen;
        }
        return 0;
    }

    /** The figures now, read together. */
    synchronized StatisticsResource.Counts read() {
        // frees first: a free counted between the two reads then cannot make the live count negative
        long frees = stripes.sum(FREES);
        long allocations = stripes.sum(ALLOCATIONS);
        return new StatisticsResource.Counts(current(ALLOCATED), peaks[ALLOCATED], current(REQUESTED), peaks[REQUESTED],
                allocations, frees);
    }

    /** Counts every block still counted as freed: for when the memory under them went back as a whole. */
    synchronized void freeAll() {
        int stripe = ThreadStripes.ofCurrentThread();
        stripes.addAt(stripe, ALLOCATED, current(ALLOCATED));
        stripes.addAt(stripe, REQUESTED, current(REQUESTED));
        stripes.addAt(stripe, FREES, stripes.sum(ALLOCATIONS) - stripes.sum(FREES));
    }

    /** {@code peak − Σ headroom}, kept within 0 and the peak while calls under way move headroom. Under the lock. */
    private long current(int field) {
        return Math.clamp(peaks[field] - stripes.sum(field), 0, peaks[field]);
    }
}
