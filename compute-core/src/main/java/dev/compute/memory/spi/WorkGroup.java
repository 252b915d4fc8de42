package dev.compute.memory.spi;

import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * Several pieces of device work as one future that remembers its pieces (a device handle's own queue's work and
 * work recorded from the user's streams or queues), so that the manager can order later work after each piece on
 * the device ({@link ComputeBackend#orderAfter}) rather than wait for the whole on the host. Completes when every
 * piece has, exceptionally with the first failure.
 */
public final class WorkGroup extends CompletableFuture<Void> {

    private final List<CompletableFuture<?>> pieces;

    private WorkGroup(List<CompletableFuture<?>> pieces) {
        this.pieces = pieces;
        CompletableFuture.allOf(pieces.toArray(CompletableFuture[]::new)).whenComplete((ignored, failure) -> {
            if (failure == null) {
                complete(null);
            } else {
                completeExceptionally(failure);
            }
        });
    }

    /** The pieces as one future. */
    public static WorkGroup of(List<? extends CompletableFuture<?>> pieces) {
        return new WorkGroup(List.copyOf(pieces));
    }

    public List<CompletableFuture<?>> pieces() {
        return pieces;
    }
}
