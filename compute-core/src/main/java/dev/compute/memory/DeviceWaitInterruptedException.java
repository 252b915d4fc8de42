package dev.compute.memory;

import java.time.Duration;

/**
 * The thread was interrupted while it waited for device work, before {@code compute.memory.device-wait-timeout} ran
 * out: the call gave up as a timeout does (nothing was changed, the work stays queued) and the thread's interrupt
 * status is kept. A {@link DeviceTimeoutException}, so that code catching those sees it as before;
 * {@link #waited()} is how long the thread waited before the interrupt, not the limit.
 */
public class DeviceWaitInterruptedException extends DeviceTimeoutException {

    public DeviceWaitInterruptedException(String message, Duration waited, InterruptedException cause) {
        super(message, waited);
        initCause(cause);
    }
}
