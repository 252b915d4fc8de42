package dev.compute.memory;

/**
 * The figures of one location's pool, in the manner of PyTorch's {@code memory_stats}. Bytes are
 * bytes; counts are totals since the manager started.
 *
 * <ul>
 *   <li>allocated: the bytes of the blocks handed out (after size rounding); requested: what callers asked for;
 *   <li>reserved: what the pool holds from the backend (whole segments, or mapped pages of expandable ones);
 *   <li>cached: reserved but not allocated, ready for reuse without a backend call; of it, reservations' cached: what
 *       the arenas of budgets' reservations hold free, which only requests under those budgets take. The largest free
 *       block is the largest a request under no reservation can take, and fragmentation is of the rest of the cache;
 *   <li>waiting requests: {@link UnifiedMemoryManager#allocateAsync} requests queued for memory now; waits: those
 *       that ever had to queue; wait timeouts: those that gave up when their timeout passed.
 *   <li>held: closed buffers whose memory is not back yet, because a view, an access or an op still holds it, or
 *       device work queued on it has not finished; neither live (no buffer is open over it) nor cached (nothing can
 *       be served from it until then). Live buffers, allocated and requested bytes count open buffers only.
 *   <li>a device buffer's host mirror is memory of its location's pool: its bytes count in allocated and requested
 *       there, and its allocation and free in the counts, but it is no buffer the user opened, so not a live buffer.
 * </ul>
 *
 * Both fragmentation figures are defined here once, and the endpoint, the metrics and the docs use these.
 */
public record MemoryStatistics(
        MemoryLocation location,
        long allocatedBytes, long allocatedBytesPeak,
        long requestedBytes, long requestedBytesPeak,
        long reservedBytes, long reservedBytesPeak,
        long cachedBytes, long largestFreeBlockBytes, long reservationsCachedBytes,
        long liveBuffers, long segments,
        long allocations, long frees,
        long poolHits, long poolMisses,
        long backendAllocations, long backendFrees,
        long oomRetries, long trims,
        long bytesHostToDevice, long bytesDeviceToHost, long bytesDeviceToDevice,
        long waitingRequests, long waits, long waitTimeouts,
        long heldBuffers, long heldBytes) {

    /**
     * {@code 1 − largestFreeBlock / (cachedBytes − reservationsCachedBytes)}: 0 when all cached memory outside the
     * budgets' reservations is one block (or none is cached). A reservation's free memory is kept, not scattered.
     */
    public double fragmentation() {
        long free = cachedBytes - reservationsCachedBytes;
        return free <= 0 ? 0.0 : 1.0 - (double) largestFreeBlockBytes / free;
    }

    /** {@code reservedBytes / allocatedBytes}: 1.0 when the pool holds nothing beyond live blocks; 0 when nothing is allocated. */
    public double overhead() {
        return allocatedBytes <= 0 ? 0.0 : (double) reservedBytes / allocatedBytes;
    }

    /** Pool hits over all pool requests; 0 before the first. */
    public double hitRate() {
        long requests = poolHits + poolMisses;
        return requests == 0 ? 0.0 : (double) poolHits / requests;
    }
}
