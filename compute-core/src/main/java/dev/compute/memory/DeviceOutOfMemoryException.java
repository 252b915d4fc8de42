package dev.compute.memory;

import org.jspecify.annotations.Nullable;

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
    /** Which budget a request the pool refused came through, and what that budget held then; set once. */
    private @Nullable String throughBudget;

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

    @Override
    public String getMessage() {
        String budget = throughBudget;
        return budget == null ? super.getMessage() : super.getMessage() + budget;
    }

    /**
     * Adds to the message which budget the refused request came through (a budget's own refusal names it already):
     * once, before the exception reaches its caller, on the thread that hands it over.
     */
    void cameThroughBudget(String budget) {
        if (throughBudget == null) {
            throughBudget = budget;
        }
    }
}
