package dev.compute.memory.spi;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.jspecify.annotations.Nullable;

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

        /**
         * A future of the caller's own, made anew, that completes once {@code finish} has run: on the thread that
         * completes this one, right after it, where a dependent action would cost more.
         */
        CompletableFuture<T> forCaller(Finish finish);
    }

    /**
     * A step of the core's own between the end of the device's work and its caller's future: freeing memory the work
     * read, or copying out what it wrote. It runs once, whatever the caller does to its future, and must not block.
     */
    @FunctionalInterface
    public interface Finish {
        /** {@code failure}: the work's, or null where it ended well. A throw fails the caller's future, never the work's. */
        void run(@Nullable Throwable failure);
    }

    /** The caller's own future for {@code work}, which stays the backend's. */
    @SuppressWarnings("unchecked")
    public static <T> CompletableFuture<T> forCaller(CompletableFuture<T> work) {
        if (work instanceof Source<?> source) {
            return (CompletableFuture<T>) source.forCaller();
        }
        CompletableFuture<T> caller = new CallersFuture<>();
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

    /** {@link #forCaller(CompletableFuture)}, the caller's future completing once {@code finish} has run. */
    @SuppressWarnings("unchecked")
    public static <T> CompletableFuture<T> forCaller(CompletableFuture<T> work, Finish finish) {
        if (work instanceof Source<?> source) {
            return (CompletableFuture<T>) source.forCaller(finish);
        }
        CompletableFuture<T> caller = new CallersFuture<>();
        work.whenComplete((value, failure) -> {
            Throwable outcome = finished(failure, finish);
            if (outcome == null) {
                caller.complete(value);
            } else {
                caller.completeExceptionally(outcome);
            }
        });
        return caller;
    }

    /**
     * A caller's future, and every future made from it ({@code thenApply} and the like): a wait on it from an
     * application's dependent action first hands the later futures the device finished with this one's on
     * ({@link CompletionThreads#beforeWaiting}), as the library's own waits do, since one of them may be what it waits for.
     */
    private static final class CallersFuture<T> extends CompletableFuture<T> {
        @Override
        public T get() throws InterruptedException, ExecutionException {
            beforeWaiting();
            return super.get();
        }

        @Override
        public T get(long timeout, TimeUnit unit) throws InterruptedException, ExecutionException, TimeoutException {
            beforeWaiting();
            return super.get(timeout, unit);
        }

        @Override
        public T join() {
            beforeWaiting();
            return super.join();
        }

        @Override
        public <U> CompletableFuture<U> newIncompleteFuture() {
            return new CallersFuture<>();
        }

        private void beforeWaiting() {
            if (!isDone()) {
                CompletionThreads.beforeWaiting();
            }
        }
    }

    /** Runs {@code finish} after work that ended with {@code failure} (null: well); what the caller's future fails with, or null. */
    public static @Nullable Throwable finished(@Nullable Throwable failure, Finish finish) {
        try {
            finish.run(failure);
        } catch (Throwable e) { // the caller's failure; the work's own, where it failed, comes first
            return failure != null ? failure : e;
        }
        return failure;
    }
}
