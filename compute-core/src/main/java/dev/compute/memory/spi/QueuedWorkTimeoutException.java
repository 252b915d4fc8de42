package dev.compute.memory.spi;

import dev.compute.memory.DeviceTimeoutException;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import org.jspecify.annotations.Nullable;

/**
 * A {@link DeviceTimeoutException} of a blocking copy that timed out after it had queued device work (the copy, or
 * some of its chunks), which may still read or write the memory it was given: {@link #queued()} completes once the
 * device is past that work. The manager records it as work in flight on the buffers the copy used, so that their
 * memory goes back to the pool only after it. A backend whose blocking copies queue nothing before their last bounded
 * wait never throws it.
 */
public class QueuedWorkTimeoutException extends DeviceTimeoutException {

    private final transient CompletableFuture<?> queued;

    public QueuedWorkTimeoutException(String message, Duration waited, CompletableFuture<?> queued) {
        super(message, waited);
        this.queued = queued;
    }

    /** Completes once the device is past the work the copy left queued. */
    public CompletableFuture<?> queued() {
        return queued;
    }

    /**
     * The work {@code failure} says a copy left queued: its own where it is one of these, else that of one it
     * suppressed (a failure after which the cleanup's wait for what was queued timed out); null where none.
     */
    public static @Nullable CompletableFuture<?> leftQueuedBy(Throwable failure) {
        if (failure instanceof QueuedWorkTimeoutException timeout) {
            return timeout.queued;
        }
        for (Throwable suppressed : failure.getSuppressed()) {
            if (suppressed instanceof QueuedWorkTimeoutException timeout) {
                return timeout.queued;
            }
        }
        return null;
    }
}
