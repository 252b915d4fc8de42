package dev.compute.memory.resource;

import dev.compute.memory.MemorySnapshot;
import dev.compute.memory.MemoryStatistics;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * Counts what passes through: allocated bytes (as the upstream set them aside) and requested bytes, current
 * and peak, and the number of allocations and frees. Lock-free and striped by thread
 * ({@link StripedByteCounters}, which says how exact the figures are), so that counting costs two threads no
 * more than one. Thread-safe.
 */
public final class StatisticsResource implements MemoryResource {

    private final MemoryResource upstream;
    private final StripedByteCounters counters = new StripedByteCounters();

    public StatisticsResource(MemoryResource upstream) {
        this.upstream = upstream;
    }

    @Override
    public Block allocate(long bytes) {
        Block block = upstream.allocate(bytes);
        counters.allocated(block.size(), block.requestedSize());
        return block;
    }

    @Override
    public void deallocate(Block block, CompletableFuture<?> inFlight) {
        long size = block.size();
        long requestedSize = block.requestedSize();
        upstream.deallocate(block, inFlight);
        counters.freed(size, requestedSize);
    }

    @Override
    public long trim(long keepBytes) {
        return upstream.trim(keepBytes);
    }

    @Override
    public void collectStatistics(MemoryStatistics.Builder into) {
        upstream.collectStatistics(into);
        into.allocatedBytes = counters.allocatedBytes();
        into.allocatedBytesPeak = counters.allocatedPeak(into.allocatedBytes);
        into.requestedBytes = counters.requestedBytes();
        into.requestedBytesPeak = counters.requestedPeak(into.requestedBytes);
        // frees first: a free counted between the two reads then cannot make liveBuffers negative
        long freeCount = counters.frees();
        long allocationCount = counters.allocations();
        into.allocations = allocationCount;
        into.frees = freeCount;
        into.liveBuffers = allocationCount - freeCount;
        into.cachedBytes = Math.max(0, into.reservedBytes - into.allocatedBytes);
    }

    @Override
    public List<MemorySnapshot.Segment> segments() {
        return upstream.segments();
    }

    @Override
    public void close() {
        upstream.close();
    }
}
