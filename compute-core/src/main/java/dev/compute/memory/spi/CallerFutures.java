package dev.compute.memory.spi;

import java.util.concurrent.CompletableFuture;

/**
 * What a caller is handed for device work that the pool also waits on before it gives memory to another buffer (an
 * op, an async copy, a kernel launch). A caller may cancel, complete, fail or time out the future it holds (its own
 * error handling does); none of that may tell the pool the device is done. So the core keeps the backend's future and
 * hands out {@link #forCaller}: a future that completes as the work does, whose completion by the caller touches
 * nothing else.
 */
public final class CallerFutures {

    private CallerFutures() {}

    /**
     * A backend's future that makes its callers' futures itself, where a dependent action on it would cost more (OpenCL's
     * queue positions, which a dependent action marks at once, and whose {@code join} waits on the joining thread).
     */
    public interface Source<T> {
        /** A future of the caller's own that completes as this one does, with its result or its failure. */
        CompletableFuture<T> forCaller();
    }

    /** The caller's own future for {@code work}, which stays the backend's. */
    @SuppressWarnings("unchecked")
    public static <T> CompletableFuture<T> forCaller(CompletableFuture<T> work) {
        if (work instanceof Source<?> source) {
            return (CompletableFuture<T>) source.forCaller();
        }
        CompletableFuture<T> caller = new CompletableFuture<>();
        // not copy(): its failures come wrapped in a CompletionException, where the work's own come as they were thrown
        work.whenComplete((value, failure) -> {
            if (failure == null) {
                caller.complete(value);
            } else {
                caller.completeExceptionally(failure);
            }
        });
        return caller;
    }
}
