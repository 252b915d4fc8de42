package dev.compute.memory.resource;

import dev.compute.memory.AllocationAboveLimitException;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.OutOfMemoryReason;

/**
 * A location's refusals of requests no release of memory can make room for: above its cap ({@code limitProperty},
 * {@code limitBytes}) or the backend's largest single allocation. What each says is what would help: raising the cap,
 * asking for less, or several buffers.
 */
public record LimitRefusals(MemoryLocation location, long limitBytes, long maxAllocationBytes, String limitProperty) {

    /**
     * The refusal of a request no release of memory can make room for ({@link BackendResource#largestPossibleBytes}).
     * Callers that round (the pool) ask this before touching anything.
     */
    public AllocationAboveLimitException aboveLimit(long requested, long rounded) {
        return aboveLimit(requested, rounded, maxAllocationBytes);
    }

    /**
     * As {@link #aboveLimit(long, long)}, from a pool whose largest block, {@code largestBlock} bytes, is less than the
     * backend's largest allocation (its pieces are whole pages or segments): a request between the two is told so.
     */
    public AllocationAboveLimitException aboveLimit(long requested, long rounded, long largestBlock) {
        if (requested <= maxAllocationBytes && requested <= limitBytes && rounded > maxAllocationBytes) {
            return new AllocationAboveLimitException(location, requested, OutOfMemoryReason.DEVICE_MEMORY, "out of " + location
                    + " memory: requested " + requested + " bytes, " + rounded + " in the whole pieces the pool takes memory in,"
                    + " above the backend's largest single allocation at " + location + " (" + maxAllocationBytes + " bytes):"
                    + " the largest block the pool gives at " + location + " is " + largestBlock + " bytes; ask for at most"
                    + " that, or for several buffers");
        }
        if (rounded > maxAllocationBytes) { // the backend could never give it, so raising the cap would not help
            return new AllocationAboveLimitException(location, requested, OutOfMemoryReason.DEVICE_MEMORY, "out of " + location
                    + " memory: requested " + requested + " bytes" + (rounded != requested ? " (" + rounded + " after rounding)" : "")
                    + ", above the backend's largest single allocation at " + location + " (" + maxAllocationBytes
                    + " bytes)" + (rounded > limitBytes ? " and above " + limitProperty + " (" + limitBytes + " bytes)" : "")
                    + ", whatever memory is free; ask for less, in several buffers");
        }
        return new AllocationAboveLimitException(location, requested, OutOfMemoryReason.POOL_LIMIT, "out of " + location
                + " memory: requested " + requested + " bytes" + (rounded != requested ? " (" + rounded + " after rounding)" : "")
                + ", above " + limitProperty + " (" + limitBytes + " bytes), the most this location may ever hold; raise "
                + limitProperty + " or ask for less");
    }

    /**
     * As {@link #aboveLimit(long, long)}, for a batch of {@code buffers} that together pass the limit, {@code total} bytes or
     * {@code taken} in a pool's whole {@code pieces}: nothing was allocated.
     */
    public AllocationAboveLimitException batchAboveLimit(int buffers, long total, long taken, String pieces) {
        return new AllocationAboveLimitException(location, total, OutOfMemoryReason.POOL_LIMIT, "out of " + location
                + " memory: a batch of " + buffers + " buffers totalling " + total + " bytes"
                + (taken != total ? " (" + taken + " in the pool's pieces: " + pieces + ")" : "") + " is above " + limitProperty + " ("
                + limitBytes + " bytes), the most this location may ever hold: nothing was allocated; raise " + limitProperty
                + " or ask for less");
    }
}
