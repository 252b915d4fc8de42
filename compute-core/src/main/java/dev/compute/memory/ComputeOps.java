package dev.compute.memory;

import java.util.concurrent.CompletableFuture;

/**
 * Fill, scale, axpy and sum on FLOAT32 and FLOAT64 buffers, run by the backend on the device's copy (syncing
 * a newer host copy there first). The async forms return when the work is queued; a buffer closed while it
 * runs keeps its memory out of the pool until it completes.
 */
public interface ComputeOps {

    CompletableFuture<Void> fillAsync(UnifiedBuffer target, double value);

    CompletableFuture<Void> scaleAsync(UnifiedBuffer x, double alpha);

    /** {@code y = alpha * x + y}; x and y may be one range, but ranges of one buffer that overlap otherwise are refused. */
    CompletableFuture<Void> axpyAsync(double alpha, UnifiedBuffer x, UnifiedBuffer y);

    CompletableFuture<Double> sumAsync(UnifiedBuffer x);

    default void fill(UnifiedBuffer target, double value) {
        fillAsync(target, value).join();
    }

    default void scale(UnifiedBuffer x, double alpha) {
        scaleAsync(x, alpha).join();
    }

    default void axpy(double alpha, UnifiedBuffer x, UnifiedBuffer y) {
        axpyAsync(alpha, x, y).join();
    }

    default double sum(UnifiedBuffer x) {
        return sumAsync(x).join();
    }
}
