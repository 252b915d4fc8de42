package dev.compute.boot.scope;

import dev.compute.memory.MemoryBudget;
import java.util.Optional;
import org.jspecify.annotations.Nullable;

/**
 * The budget the work on this thread allocates through: a web request's own budget ({@link RequestBudgetFilter}), a
 * task's ({@link TaskBudgetDecorator}), or one the application opens itself. Scopes nest: closing one puts back the
 * budget that was current before it. Thread-bound, as a servlet request's dispatch is; a request's later asynchronous
 * dispatches get its budget again on their threads.
 *
 * <pre>{@code
 * MemoryBudget budget = BudgetScope.current().orElseThrow();   // tenant-a/request-17 while the request runs
 * try (UnifiedBuffer input = budget.allocate(FLOAT32, n, DEVICE)) { ... }
 * }</pre>
 */
public final class BudgetScope implements AutoCloseable {

    private static final ThreadLocal<@Nullable MemoryBudget> CURRENT = new ThreadLocal<>();

    private final @Nullable MemoryBudget previous;
    private final Thread thread = Thread.currentThread();
    private boolean closed;

    private BudgetScope(@Nullable MemoryBudget previous) {
        this.previous = previous;
    }

    /** The budget current on this thread, if any. */
    public static Optional<MemoryBudget> current() {
        return Optional.ofNullable(CURRENT.get());
    }

    /** Makes {@code budget} current on this thread until the scope closes (which does not close the budget). */
    public static BudgetScope open(MemoryBudget budget) {
        BudgetScope scope = new BudgetScope(CURRENT.get());
        CURRENT.set(budget);
        return scope;
    }

    /** Puts back the budget current before; on its own thread only, once. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        if (Thread.currentThread() != thread) {
            throw new WrongThreadException("a budget scope is closed on the thread that opened it, " + thread.getName());
        }
        closed = true;
        if (previous == null) {
            CURRENT.remove();
        } else {
            CURRENT.set(previous);
        }
    }
}
