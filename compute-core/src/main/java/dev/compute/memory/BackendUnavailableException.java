package dev.compute.memory;

/** The chosen backend cannot run here; the message carries the provider's reason. */
public class BackendUnavailableException extends ComputeMemoryException {
    private final String backend;
    private final String reason;

    public BackendUnavailableException(String backend, String reason) {
        super("compute backend '" + backend + "' is not available: " + reason);
        this.backend = backend;
        this.reason = reason;
    }

    public String backend() {
        return backend;
    }

    public String reason() {
        return reason;
    }
}
