package dev.compute.boot.scope;

import dev.compute.boot.ComputeBudgets;
import dev.compute.memory.BudgetSpec;
import dev.compute.memory.MemoryBudget;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;
import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;

/**
 * Makes and closes the budgets of requests and tasks: each under a configured budget (or one under it), limited by
 * that budget's {@code request-limit}, named {@code request-<n>} or {@code task-<n>}; its close closes what the work
 * forgot and says so in the log, with what the work was.
 */
final class ScopedBudgets {

    private static final Log log = LogFactory.getLog(ScopedBudgets.class);

    private final ComputeBudgets budgets;
    private final AtomicLong made = new AtomicLong();

    ScopedBudgets(ComputeBudgets budgets) {
        this.budgets = budgets;
    }

    /** A budget of its own for a piece of work of {@code kind} ({@code request}, {@code task}) under {@code parent}. */
    MemoryBudget open(MemoryBudget parent, String kind) {
        long limit = budgets.configuredFor(parent).map(ComputeBudgets.Configured::requestLimitBytes).filter(bytes -> bytes > 0)
                .orElse(parent.limitBytes());
        return parent.child(BudgetSpec.of(kind + "-" + made.incrementAndGet(), Math.min(limit, parent.limitBytes())));
    }

    /** Closes the work's budget, logging what it forgot to close ({@code work}: what it was, for the log). */
    static void close(MemoryBudget budget, String work) {
        close(budget, () -> work);
    }

    /**
     * As {@link #close(MemoryBudget, String)}, the work described only where something was left: the description is the
     * application's code (a task's toString()), which may throw, and must not keep the budget from closing.
     */
    static void close(MemoryBudget budget, Supplier<String> describe) {
        List<MemoryBudget.Leftover> leftovers = budget.closeAndReport();
        if (!leftovers.isEmpty() && log.isWarnEnabled()) {
            String work;
            try {
                work = describe.get();
            } catch (RuntimeException e) {
                work = "work whose description failed (" + e + ")";
            }
            long buffers = leftovers.stream().mapToLong(MemoryBudget.Leftover::buffers).sum();
            long bytes = leftovers.stream().mapToLong(MemoryBudget.Leftover::bytes).sum();
            log.warn(work + " ended with " + buffers + " buffer(s) of " + bytes + " bytes still open in memory budget '" + budget.path()
                    + "'; closed them now: " + leftovers.stream().map(each -> each.budget() + ": " + each.buffers() + " of " + each.bytes()
                    + " bytes").toList());
        }
    }
}
