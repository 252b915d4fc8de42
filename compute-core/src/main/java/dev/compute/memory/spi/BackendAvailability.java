package dev.compute.memory.spi;

import java.util.Objects;

/** A provider's answer to "can you run here?": yes, with what it found, or no, with why. */
public record BackendAvailability(boolean available, String detail) {

    public BackendAvailability {
        Objects.requireNonNull(detail, "detail");
    }

    public static BackendAvailability available(String whatWasFound) {
        return new BackendAvailability(true, whatWasFound);
    }

    public static BackendAvailability unavailable(String reason) {
        return new BackendAvailability(false, reason);
    }
}
