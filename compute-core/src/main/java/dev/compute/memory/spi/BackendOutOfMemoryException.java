package dev.compute.memory.spi;

/**
 * Thrown by a backend when the device (or the host, for host locations) has no memory for a request. The pool
 * catches it, releases its cached memory and retries once before telling the caller.
 */
public class BackendOutOfMemoryException extends RuntimeException {
    public BackendOutOfMemoryException(String message) {
        super(message);
    }

    public BackendOutOfMemoryException(String message, Throwable cause) {
        super(message, cause);
    }
}
