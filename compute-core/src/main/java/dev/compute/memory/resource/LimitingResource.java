package dev.compute.memory.resource;

import dev.compute.memory.AllocationAboveLimitException;
import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.OutOfMemoryReason;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Refuses allocations that would take the bytes allocated through it past a limit, as RMM's limiting adaptor: a
 * budget below the location's cap, composed by the application (for example over the pool, so that one part of a
 * service cannot take all of it). Counts the upstream's rounded block sizes. The check and the count are one
 * atomic step, so concurrent allocations cannot overshoot together; a block being freed is counted out after the
 * upstream has it back, so the figure may briefly be high, never low. Thread-safe.
 */
public final class LimitingResource implements MemoryResource {

    private final MemoryResource upstream;
    private final MemoryLocation location;
    private final long limitBytes;
    private final String limitName;
    private final AtomicLong allocated = new AtomicLong();

    /** {@code limitName} says where the limit comes from (a property, a tenant), for the error message. */
    public LimitingResource(MemoryResource upstream, MemoryLocation location, long limitBytes, String limitName) {
        if (limitBytes <= 0) {
            throw new IllegalArgumentException("limitBytes must be positive: " + limitBytes);
        }
        this.upstream = upstream;
        this.location = location;
        this.limitBytes = limitBytes;
        this.limitName = limitName;
    }

    @Override
    public Block allocate(long bytes) {
        if (bytes <= 0) {
            throw new IllegalArgumentException("allocation size must be positive: " + bytes + " bytes");
        }
        if (bytes > limitBytes) {
            throw new AllocationAboveLimitException(location, bytes, OutOfMemoryReason.ADAPTOR_LIMIT, "out of " + location
                    + " memory: requested " + bytes + " bytes, above the limit of " + limitBytes + " bytes (" + limitName
                    + "), the most allocated through it at once");
        }
        long after = allocated.addAndGet(bytes);
        if (after > limitBytes || after < 0) {
            allocated.addAndGet(-bytes);
            throw new DeviceOutOfMemoryException(location, bytes, OutOfMemoryReason.ADAPTOR_LIMIT, "out of " + location
                    + " memory: requested " + bytes + " bytes with " + (after - bytes) + " bytes allocated would pass the limit of "
                    + limitBytes + " bytes (" + limitName + ")");
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

    /** Bytes allocated through this resource and not freed. */
    public long allocatedBytes() {
        return allocated.get();
    }

    public long limitBytes() {
        return limitBytes;
    }

    @Override
    public void close() {
        upstream.close();
    }
}
