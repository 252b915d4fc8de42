package dev.compute.memory.resource;

import java.util.concurrent.atomic.AtomicLong;

/**
 * Allocated and requested bytes in use with their peaks, and the counts of allocations and frees, kept so that
 * threads allocating at once do not write one shared cache line on every call (which made a pair on two
 * threads several times slower than on one). Each thread adds to its own stripe ({@link ThreadStripes});
 * a stripe's byte count moves into a shared base only once it reaches ±{@value #PUBLISH_BYTES} bytes, so
 * small blocks allocated and freed again never touch the base.
 *
 * <p>Current figures are the base plus every stripe: exact whenever no call is under way. A peak is raised on
 * each allocation to the base plus the calling thread's stripe: exact while one thread allocates; when
 * several do, it may be off by what the other stripes hold unpublished, less than {@value #PUBLISH_BYTES}
 * bytes each. It is never below a current figure read with it.
 */
final class StripedByteCounters {

    /** A stripe's bytes move to the base at this size: large blocks (device tensors) are counted at once. */
    static final long PUBLISH_BYTES = 1L << 20;

    private static final int ALLOCATED = 0;
    private static final int REQUESTED = 1;
    private static final int ALLOCATIONS = 2;
    private static final int FREES = 3;

    private final StripedLongs stripes = new StripedLongs();
    private final Bytes allocated = new Bytes(ALLOCATED);
    private final Bytes requested = new Bytes(REQUESTED);

    /** One byte figure: its counter in every stripe, the published base, and the peak. */
    private final class Bytes {
        private final int field;
        private final AtomicLong base = new AtomicLong();
        private final AtomicLong peak = new AtomicLong();

        Bytes(int field) {
            this.field = field;
        }

        /** Adds to this thread's stripe, publishing it when due; returns the figure as this thread sees it, base plus its stripe. */
        long add(long bytes) {
            long unpublished = stripes.add(field, bytes);
            if (unpublished < PUBLISH_BYTES && unpublished > -PUBLISH_BYTES) {
                return base.get() + unpublished;
            }
            // stripe first: a reader between the two steps misses these bytes for a moment, but never counts them
            // twice, which would raise a peak that was never reached
            stripes.add(field, -unpublished);
            return base.addAndGet(unpublished);
        }

        void raisePeak(long candidate) {
            long seen = peak.get();
            while (candidate > seen && !peak.compareAndSet(seen, candidate)) {
                seen = peak.get();
            }
        }

        long current() {
            return base.get() + stripes.sum(field);
        }

        /** The peak, raised to {@code current} (a figure just read) so that a snapshot never shows peak below current. */
        long peak(long current) {
            raisePeak(current);
            return peak.get();
        }
    }

    void allocated(long allocatedBytes, long requestedBytes) {
        allocated.raisePeak(allocated.add(allocatedBytes));
        requested.raisePeak(requested.add(requestedBytes));
        stripes.add(ALLOCATIONS, 1);
    }

    void freed(long allocatedBytes, long requestedBytes) {
        allocated.add(-allocatedBytes);
        requested.add(-requestedBytes);
        stripes.add(FREES, 1);
    }

    long allocatedBytes() {
        return allocated.current();
    }

    long requestedBytes() {
        return requested.current();
    }

    long allocatedPeak(long current) {
        return allocated.peak(current);
    }

    long requestedPeak(long current) {
        return requested.peak(current);
    }

    long allocations() {
        return stripes.sum(ALLOCATIONS);
    }

    long frees() {
        return stripes.sum(FREES);
    }
}
