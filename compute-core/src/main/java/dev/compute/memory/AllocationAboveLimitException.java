package dev.compute.memory;

/**
 * An allocation larger than a limit it must fit under: the location's cap, the backend's largest single allocation,
 * or a limit composed into the chain (a {@link dev.compute.memory.resource.LimitingResource}). No memory given back can make room for it, so it fails at
 * once: the pool keeps its cache, and {@link OutOfMemoryHandler}s are not asked to free memory of their own.
 */
public class AllocationAboveLimitException extends DeviceOutOfMemoryException {

    public AllocationAboveLimitException(MemoryLocation location, long requestedBytes, OutOfMemoryReason reason, String message) {
        super(location, requestedBytes, reason, message);
    }
}
