package dev.compute.memory.resource;

import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemorySnapshot;
import dev.compute.memory.MemoryStatistics;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * Counts what passes through: allocated bytes (as the upstream set them aside) and requested bytes, current
 * and peak, and the number of allocations and frees. Counted where blocks pass, striped by thread and
 * lock-free on the way ({@link StripedByteCounters}, which says how exact the figures are: peaks included,
 * whichever thread frees what another allocated), so that counting costs two threads no more than one, and
 * reading them costs the pool nothing. Thread-safe.
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
        counters.addTo(into);
        into.cachedBytes = Math.max(0, into.reservedBytes - into.allocatedBytes);
    }

    @Override
    public List<MemorySnapshot.Segment> segments() {
        return upstream.segments();
    }

    /**
     * Closes the upstream. Blocks still counted then went back with all of its memory, and are counted freed; an
     * upstream that kept memory (device work that did not finish) keeps them counted, with what it kept.
     */
    @Override
    public void close() {
        upstream.close();
        MemoryStatistics.Builder left = MemoryStatistics.builder(MemoryLocation.HOST); // only its reserved bytes are read
        upstream.collectStatistics(left);
        if (left.reservedBytes == 0) {
            counters.freeAll();
        }
    }
}
