package dev.compute.memory;

/**
 * An allocation failed after the pool released its cached memory and retried. The message says
 * what was asked, what is live, cached and reserved, what the device has free and the largest
 * free block, so the reader can tell a real shortage from fragmentation.
 */
public class DeviceOutOfMemoryException extends ComputeMemoryException {
    private final MemoryLocation location;
    private final long requestedBytes;

    public DeviceOutOfMemoryException(MemoryLocation location, long requestedBytes, String message) {
        super(message);
        this.location = location;
        this.requestedBytes = requestedBytes;
    }

    public MemoryLocation location() {
        return location;
    }

    public long requestedBytes() {
        return requestedBytes;
    }
}
