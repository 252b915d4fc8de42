package dev.compute.memory;

import java.time.Duration;

/**
 * Device work a call had to wait for did not finish within {@code compute.memory.device-wait-timeout}: a kernel
 * or copy that runs that long, or a device (or an event, or a future of one's own) that will never complete.
 * Nothing was changed by the call that failed; the memory the work uses stays out of the pool until it finishes.
 */
public class DeviceTimeoutException extends ComputeMemoryException {

    private final Duration waited;

    public DeviceTimeoutException(String message, Duration waited) {
        super(message);
        this.waited = waited;
    }

    /** How long the call waited before it gave up. */
    public Duration waited() {
        return waited;
    }
}
