package dev.compute.memory.resource;

import java.util.concurrent.CompletableFuture;

/** The one completed future a free without device work passes: no allocation on the hot path. */
public final class NothingInFlight {
    public static final CompletableFuture<Void> FUTURE = CompletableFuture.completedFuture(null);

    private NothingInFlight() {}
}
