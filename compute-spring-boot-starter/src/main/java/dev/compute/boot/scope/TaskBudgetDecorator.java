package dev.compute.boot.scope;

import dev.compute.memory.MemoryBudget;
import org.springframework.core.task.TaskDecorator;

/**
 * Runs each task of Spring Boot's task executors and schedulers submitted where a budget is current (a web request's,
 * {@link BudgetScope}) in a budget of its own under that budget's tenant, the configured budget at its top (not under
 * the request's, which may close before the task runs), current while the task runs and closed as it returns; what
 * the task forgot to close is closed then and logged. A task submitted where no budget is current runs as it is.
 */
public final class TaskBudgetDecorator implements TaskDecorator {

    private final ScopedBudgets budgets;

    TaskBudgetDecorator(ScopedBudgets budgets) {
        this.budgets = budgets;
    }

    @Override
    public Runnable decorate(Runnable task) {
        MemoryBudget current = BudgetScope.current().orElse(null);
        if (current == null) {
            return task;
        }
        MemoryBudget tenant = current;
        while (tenant.parent().isPresent()) {
            tenant = tenant.parent().get();
        }
        MemoryBudget parent = tenant;
        return () -> {
            MemoryBudget budget = budgets.open(parent, "task");
            try (BudgetScope scope = BudgetScope.open(budget)) {
                task.run();
            } finally {
                ScopedBudgets.end(budget, parent, () -> "task " + task); // described only where it left something open
            }
        };
    }
}
