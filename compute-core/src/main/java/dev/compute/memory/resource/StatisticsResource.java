package dev.compute.memory.resource;

import dev.compute.memory.MemorySnapshot;
import dev.compute.memory.MemoryStatistics;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

/**
 * Counts what passes through: allocated bytes (as the upstream set them aside) and requested bytes, current
 * and peak, and the number of allocations and frees. Lock-free: byte counts are atomics (a peak needs the
 * exact current figure), the counts are striped adders that threads do not contend on. A peak read while
 * another thread allocates may trail the current figure by that allocation. Thread-safe.
 */
public final class StatisticsResource implements MemoryResource {

    private final MemoryResource upstream;
    private final AtomicLong allocated = new AtomicLong();
    private final AtomicLong allocatedPeak = new AtomicLong();
    private final AtomicLong requested = new AtomicLong();
    private final AtomicLong requestedPeak = new AtomicLong();
    private final LongAdder allocations = new LongAdder();
    private final LongAdder frees = new LongAdder();

    public StatisticsResource(MemoryResource upstream) {
        this.upstream = upstream;
    }

    @Override
    public Block allocate(long bytes) {
        Block block = upstream.allocate(bytes);
        raise(allocated, allocatedPeak, block.size());
        raise(requested, requestedPeak, block.requestedSize());
        allocations.increment();
        return block;
    }

    private static void raise(AtomicLong current, AtomicLong peak, long by) {
        long now = current.addAndGet(by);
        long seen = peak.get();
        while (now > seen && !peak.compareAndSet(seen, now)) {
            seen = peak.get();
        }
    }

    @Override
    public void deallocate(Block block, CompletableFuture<?> inFlight) {
        long size = block.size();
        long requestedSize = block.requestedSize();
        upstream.deallocate(block, inFlight);
        allocated.addAndGet(-size);
        requested.addAndGet(-requestedSize);
        frees.increment();
    }

    @Override
    public long trim(long keepBytes) {
        return upstream.trim(keepBytes);
    }

    @Override
    public void collectStatistics(MemoryStatistics.Builder into) {
        upstream.collectStatistics(into);
        into.allocatedBytes = allocated.get();
        into.allocatedBytesPeak = allocatedPeak.get();
        into.requestedBytes = requested.get();
        into.requestedBytesPeak = requestedPeak.get();
        // frees first: a free counted between the two reads then cannot make liveBuffers negative
        long freeCount = frees.sum();
        long allocationCount = allocations.sum();
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
