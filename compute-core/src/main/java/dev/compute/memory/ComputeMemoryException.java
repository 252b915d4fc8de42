package dev.compute.memory;

/** The root of every exception this library throws on purpose. */
public class ComputeMemoryException extends RuntimeException {
    public ComputeMemoryException(String message) {
        super(message);
    }

    public ComputeMemoryException(String message, Throwable cause) {
        super(message, cause);
    }
}
