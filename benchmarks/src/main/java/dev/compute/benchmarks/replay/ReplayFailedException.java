package dev.compute.benchmarks.replay;

/** A replay that could not go on: the message names the event that failed (file, line, id, bytes) and why. */
public final class ReplayFailedException extends RuntimeException {

    public ReplayFailedException(String message) {
        super(message);
    }
}
