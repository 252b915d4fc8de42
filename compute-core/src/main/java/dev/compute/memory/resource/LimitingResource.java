package dev.compute.memory.resource;

import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemorySnapshot;
import dev.compute.memory.MemoryStatistics;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Refuses allocations that would take the bytes allocated through it past a limit (as RMM's limiting
 * adaptor). Counts the upstream's rounded block sizes. The check and the count are one atomic step, so
 * concurrent allocations cannot overshoot together. Thread-safe.
 */
public final class LimitingResource implements MemoryResource {

    private final MemoryResource upstream;
    private final MemoryLocation location;
    private final long limitBytes;
    private final String limitName;
    private final AtomicLong allocated = new AtomicLong();

    /** {@code limitName} is how the user set the limit (a property name), for the error message. */
    public LimitingResource(MemoryResource upstream, MemoryLocation location, long limitBytes, String limitName) {
        this.upstream = upstream;
        this.location = location;
        this.limitBytes = limitBytes;
        this.limitName = limitName;
    }

    @Override
    public Block allocate(long bytes) {
        long after = allocated.addAndGet(bytes);
        if (after > limitBytes || after < 0) {
            allocated.addAndGet(-bytes);
            throw new DeviceOutOfMemoryException(location, bytes, "out of " + location + " memory: requested " + bytes
                    + " bytes with " + (after - bytes) + " bytes allocated would pass the limit of " + limitBytes
                    + " bytes (" + limitName + ")");
        }
        try {
            Block block = upstream.allocate(bytes);
            allocated.addAndGet(block.size() - bytes);
            return block;
        } catch (RuntimeException e) {
            allocated.addAndGet(-bytes);
            throw e;
        }
    }

    @Override
    public void deallocate(Block block, CompletableFuture<?> inFlight) {
        long size = block.size();
        upstream.deallocate(block, inFlight);
        allocated.addAndGet(-size);
    }

    @Override
    public long trim(long keepBytes) {
        return upstream.trim(keepBytes);
    }

    @Override
    public void collectStatistics(MemoryStatistics.Builder into) {
        upstream.collectStatistics(into);
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
