package dev.compute.memory;

/**
 * An allocation failed after the pool released its cached memory and retried. The message says
 * what was asked, what is live, cached and reserved, what the device has free and the largest
 * free block, so the reader can tell a real shortage from fragmentation; {@link #reason()} says which
 * limit was met, for figures and alerts.
 */
public class DeviceOutOfMemoryException extends ComputeMemoryException {
    private final MemoryLocation location;
    private final long requestedBytes;
    private final OutOfMemoryReason reason;

    public DeviceOutOfMemoryException(MemoryLocation location, long requestedBytes, OutOfMemoryReason reason, String message) {
        super(message);
        this.location = location;
        this.requestedBytes = requestedBytes;
        this.reason = reason;
    }

    public MemoryLocation location() {
        return location;
    }

    public long requestedBytes() {
        return requestedBytes;
    }

    public OutOfMemoryReason reason() {
        return reason;
    }
}
