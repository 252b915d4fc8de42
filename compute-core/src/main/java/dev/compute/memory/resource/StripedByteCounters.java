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
 * bytes to its stripe's headroom; an allocation takes them from its stripe's headroom. Either holds the stripe
 * while it counts (one compare-and-set on the thread's own cache line, and a release store to let go), and
 * writes the stripe's figures plainly meanwhile: one atomic step per call rather than one per figure. Only when
 * its stripe has too little does an allocation take the lock and collect every stripe's headroom, holding each
 * stripe for the moment it takes from it; if all of it is still too little, the new figure is higher than any before it, and
 * the peak is raised to it. So a thread that frees what it allocated (a step's tensors, a request's buffers)
 * stays on its own line. From a stripe that has not allocated since the last collection (a thread that frees
 * what others allocate) the collector takes all, so a producer collects its consumer's frees in batches; from
 * one that has, only what it still lacks, so that two threads working alike settle with the headroom each
 * needs rather than take it from each other in turns.
 *
 * <p>How exact: figures read while no call is under way are exact, peaks included, whichever threads allocated
 * and freed. A call under way while they are read may be missed or counted in part. A free that runs while
 * another thread raises the peak counts as if it came after that allocation; the caller counts each free before the
 * memory can be lent again ({@link StatisticsResource#deallocate}), so an allocation that the free made possible always
 * comes after it, and the peak never exceeds what was held at once.
 */
final class StripedByteCounters {

    /** Headroom of allocated bytes, per stripe. */
    private static final int ALLOCATED = 0;
    /** Headroom of requested bytes, per stripe. */
    private static final int REQUESTED = 1;
    private static final int ALLOCATIONS = 2;
    private static final int FREES = 3;
    /** 1 while a thread holds the stripe: the figures above are written only by the holder. */
    private static final int HELD = 4;

    private final StripedLongs stripes = new StripedLongs();
    /** The peaks of ALLOCATED and REQUESTED; under this object's lock. */
    private final long[] peaks = new long[2];
    /** Per figure and stripe, the stripe's allocations when the figure was last collected; under this object's lock. */
    private final long[][] allocationsAtCollection = new long[2][ThreadStripes.COUNT];

    void allocated(long allocatedBytes, long requestedBytes) {
        int stripe = ThreadStripes.ofCurrentThread();
        boolean allocatedTaken;
        boolean requestedTaken;
        hold(stripe);
        try {
            allocatedTaken = takeHeld(stripe, ALLOCATED, allocatedBytes);
            requestedTaken = takeHeld(stripe, REQUESTED, requestedBytes);
            addHeld(stripe, ALLOCATIONS, 1);
        } finally {
            letGo(stripe);
        }
        // collected with the stripe let go: a holder never waits for anything, so the collector can wait for it
        if (!allocatedTaken) {
            collect(stripe, ALLOCATED, allocatedBytes);
        }
        if (!requestedTaken) {
            collect(stripe, REQUESTED, requestedBytes);
        }
    }

    /** Counts a free; the caller counts it before the memory can be lent again, so that no peak counts it twice. */
    void freed(long allocatedBytes, long requestedBytes) {
        int stripe = ThreadStripes.ofCurrentThread();
        hold(stripe);
        try {
            addHeld(stripe, ALLOCATED, allocatedBytes);
            addHeld(stripe, REQUESTED, requestedBytes);
            addHeld(stripe, FREES, 1);
        } finally {
            letGo(stripe);
        }
    }

    /** Waits for the stripe's holder, who counts and lets go (it may have been descheduled meanwhile: yield). */
    private void hold(int stripe) {
        for (int spins = 0; stripes.compareAndExchange(stripe, HELD, 0, 1) != 0; spins++) {
            if (spins < 64) {
                Thread.onSpinWait();
            } else {
                Thread.yield();
            }
        }
    }

    private void letGo(int stripe) {
        stripes.setRelease(stripe, HELD, 0);
    }

    private void addHeld(int stripe, int field, long delta) {
        stripes.setOpaque(stripe, field, stripes.get(stripe, field) + delta);
    }

    /** Takes {@code bytes} of the held stripe's headroom; false, taking nothing, when it has too little. */
    private boolean takeHeld(int stripe, int field, long bytes) {
        long headroom = stripes.get(stripe, field);
        if (headroom < bytes) {
            return false;
        }
        stripes.setOpaque(stripe, field, headroom - bytes);
        return true;
    }

    /** Takes {@code bytes} of headroom from every stripe (this one's first), or raises the peak by what they lack. */
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
            add(stripe, field, collected - bytes);
        }
    }

    private void add(int stripe, int field, long delta) {
        hold(stripe);
        try {
            addHeld(stripe, field, delta);
        } finally {
            letGo(stripe);
        }
    }

    private long takeAll(int stripe, int field) {
        return takeUpTo(stripe, field, Long.MAX_VALUE);
    }

    /** Takes up to {@code most} bytes of a stripe's headroom; returns how many it took. */
    private long takeUpTo(int stripe, int field, long most) {
        hold(stripe);
        try {
            long taken = Math.clamp(stripes.get(stripe, field), 0, most);
            addHeld(stripe, field, -taken);
            return taken;
        } finally {
            letGo(stripe);
        }
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
        long allocated = current(ALLOCATED);
        long requested = current(REQUESTED);
        long live = stripes.sum(ALLOCATIONS) - stripes.sum(FREES);
        hold(stripe);
        try {
            addHeld(stripe, ALLOCATED, allocated);
            addHeld(stripe, REQUESTED, requested);
            addHeld(stripe, FREES, live);
        } finally {
            letGo(stripe);
        }
    }

    /** {@code peak − Σ headroom}, kept within 0 and the peak while calls under way move headroom. Under the lock. */
    private long current(int field) {
        return Math.clamp(peaks[field] - stripes.sum(field), 0, peaks[field]);
    }
}
