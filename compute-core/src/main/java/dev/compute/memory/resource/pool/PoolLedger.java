package dev.compute.memory.resource.pool;

/**
 * What a pool holds from its backend and how often it asked: reserved bytes (plain segments plus mapped
 * pages) against the cap, the peak, the segments and ranges held, and the backend calls that changed them.
 * Shared by a pool's arenas so the cap covers both. Written under the pool's lock, only around backend calls;
 * volatile, so that the pool's statistics read them without the lock.
 */
public final class PoolLedger {

    private final long maxPoolSize;
    volatile long reserved;
    volatile long reservedPeak;
    volatile int segments;
    volatile long segmentAllocations;
    volatile long segmentFrees;
    volatile long pageMaps;
    volatile long pageUnmaps;
    volatile long rangeReservations;
    volatile long rangeReleases;

    public PoolLedger(long maxPoolSize) {
        this.maxPoolSize = maxPoolSize;
    }

    public long maxPoolSize() {
        return maxPoolSize;
    }

    public long reserved() {
        return reserved;
    }

    public long reservedPeak() {
        return reservedPeak;
    }

    /** Plain segments and reserved ranges held. */
    public int segments() {
        return segments;
    }

    /** Calls that gave the pool memory: segment allocations and page maps. */
    public long backendAllocations() {
        return segmentAllocations + pageMaps;
    }

    /** Calls that gave memory back: segment frees and page unmaps. */
    public long backendFrees() {
        return segmentFrees + pageUnmaps;
    }

    /** Every call that changed what the pool holds, address-range reservations and releases included. */
    public long backendCalls() {
        return backendAllocations() + backendFrees() + rangeReservations + rangeReleases;
    }

    boolean fits(long moreBytes) {
        return reserved + moreBytes <= maxPoolSize;
    }

    void add(long bytes) {
        reserved += bytes;
        if (reserved > reservedPeak) {
            reservedPeak = reserved;
        }
    }

    void remove(long bytes) {
        reserved -= bytes;
    }
}
