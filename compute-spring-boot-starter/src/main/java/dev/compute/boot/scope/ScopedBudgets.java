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

    /**
     * A budget of its own for a piece of work of {@code kind} ({@code request}, {@code task}) under {@code parent}; or,
     * where the parent has closed (a tenant the application added itself, then closed, while work still names it),
     * the parent itself: the work runs in it, and what it allocates is refused with the tenant's name, rather than the
     * work failing before it runs (a server error; a task's {@code Future} that never ends) or running with no limit.
     * {@link #end} leaves such a parent as it is.
     */
    MemoryBudget open(MemoryBudget parent, String kind) {
        long limit = budgets.configuredFor(parent).map(ComputeBudgets.Configured::requestLimitBytes).filter(bytes -> bytes > 0)
                .orElse(parent.limitBytes());
        try {
            return parent.child(BudgetSpec.of(kind + "-" + made.incrementAndGet(), Math.min(limit, parent.limitBytes())));
        } catch (IllegalStateException e) {
            if (parent.isClosed()) {
                return parent;
            }
            throw e;
        }
    }

    /** Ends the budget {@link #open} gave the work under {@code parent}: closes it, unless it is that closed parent. */
    static void end(MemoryBudget budget, MemoryBudget parent, Supplier<String> describe) {
        if (budget != parent) {
            close(budget, describe);
        }
    }

    /**
     * Closes the work's budget, logging what it forgot to close, the work described only where something was left: the
     * description may be the application's code (a task's toString()), which may throw, and must not keep the budget
     * from closing.
     */
    private static void close(MemoryBudget budget, Supplier<String> describe) {
        List<MemoryBudget.Leftover> leftovers = budget.closeAndReport();
        if (!leftovers.isEmpty() && log.isWarnEnabled()) {
            String work;
            try {
                work = describe.get();
            } catch (Throwable e) { // the application's code: whatever it throws, the budget is closed and the report goes out
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
