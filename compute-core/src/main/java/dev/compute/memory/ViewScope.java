package dev.compute.memory;

import dev.compute.memory.lifetime.ViewRegions;
import java.util.Objects;
import java.util.concurrent.Callable;

/**
 * A stretch of one thread's work that its host views end with, as Spring's open-session-in-view ends a persistence
 * context with the request: every {@link UnifiedBuffer#hostView()} and {@link UnifiedBuffer#readOnlyHostView()} taken
 * on the thread while the scope is open stops working when it closes, whichever buffers they view and whoever closes
 * those buffers meanwhile. So a buffer closed on another thread gets its memory back when the work that viewed it
 * ends, even if that thread then waits idle for minutes (a servlet container's worker, a pool's thread).
 *
 * <pre>{@code
 * try (ViewScope views = ViewScope.open()) {
 *     double norm = norm(vector.readOnlyHostView());   // a view of a buffer another thread may close
 * } // the view ends here
 * }</pre>
 *
 * <p>With the starter, every web request and every task of Spring's task executors runs in one; {@link #wrap} gives a
 * task of one's own its scope. Views taken inside a scope are confined to its thread (cheap: no handshake with other
 * threads). Outside any scope a view lives until its buffer closes; it is confined too on the thread that allocated
 * the buffer while no other thread has used it, and shared otherwise (any thread can then end it, so closing the buffer
 * anywhere gives its memory back at once, at the cost of a handshake with every thread). Scopes nest: a view belongs to
 * the innermost. Only the thread that opened a scope may close it.
 */
public final class ViewScope implements AutoCloseable {

    private final ViewRegions.Region region;

    private ViewScope(ViewRegions.Region region) {
        this.region = region;
    }

    /** Opens a scope on the calling thread. */
    public static ViewScope open() {
        return new ViewScope(ViewRegions.open());
    }

    /** {@code task} run inside a scope of its own: for executors, scheduled tasks, {@code ForkJoinPool}'s tasks. */
    public static Runnable wrap(Runnable task) {
        Objects.requireNonNull(task, "task");
        return () -> {
            try (ViewScope scope = open()) {
                task.run();
            }
        };
    }

    /** {@code task} run inside a scope of its own. */
    public static <T> Callable<T> wrap(Callable<T> task) {
        Objects.requireNonNull(task, "task");
        return () -> {
            try (ViewScope scope = open()) {
                return task.call();
            }
        };
    }

    /** Ends every view taken on this thread since the scope opened (and in scopes opened inside it and left open). */
    @Override
    public void close() {
        region.close();
    }
}
