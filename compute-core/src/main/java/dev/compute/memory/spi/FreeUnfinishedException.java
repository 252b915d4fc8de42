package dev.compute.memory.spi;

/**
 * Thrown by {@link ComputeBackend#free} that did part of its work and could not undo it: the allocation is no longer
 * usable (OpenCL's PINNED memory, its host mapping gone when the buffer's release was refused) but is still held. The
 * caller keeps counting it, never hands it out again, and calls {@code free} again later to finish. Any other exception
 * from {@code free} leaves the allocation as it was, usable.
 */
public class FreeUnfinishedException extends RuntimeException {
    public FreeUnfinishedException(String message) {
        super(message);
    }

    public FreeUnfinishedException(String message, Throwable cause) {
        super(message, cause);
    }
}
