package dev.compute.boot.scope;

import dev.compute.memory.MemoryBudget;
import java.util.concurrent.Future;
import java.util.function.Supplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.springframework.core.task.TaskDecorator;

/**
 * Runs each task of Spring Boot's task executors and schedulers submitted where a budget is current (a web request's,
 * {@link BudgetScope}) in a budget of its own under that budget's tenant, the configured budget at its top (not under
 * the request's, which may close before the task runs), current while the task runs and closed as it returns; what
 * the task forgot to close is closed then and logged. A task submitted where no budget is current runs as it is.
 */
public final class TaskBudgetDecorator implements TaskDecorator {

    /** {@code FutureTask.toString()} before it runs. */
    private static final Pattern NOT_COMPLETED = Pattern.compile("[\\w.$]+@\\p{XDigit}+\\[Not completed, task = (.*)]", Pattern.DOTALL);
    /** What {@code submit(Runnable)} wraps the Runnable in. */
    private static final Pattern RUNNABLE_ADAPTER = Pattern.compile(
            "java\\.util\\.concurrent\\.Executors\\$RunnableAdapter@\\p{XDigit}+\\[Wrapped task = (.*)]", Pattern.DOTALL);

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
            Supplier<String> described = describedBeforeItRuns(task);
            MemoryBudget budget = budgets.open(parent, "task");
            try (BudgetScope scope = BudgetScope.open(budget)) {
                task.run();
            } finally {
                ScopedBudgets.end(budget, parent, described);
            }
        };
    }

    /**
     * What a warning about the task's leftovers calls it. A {@link Future} task (the {@code FutureTask} an executor's
     * {@code submit} makes) forgets what was submitted once it has run, and then reads
     * {@code FutureTask@1a2b[Completed normally]}: it is read before it runs, and named by the Callable or Runnable
     * submitted. Any other task is described only where it left something open.
     */
    private static Supplier<String> describedBeforeItRuns(Runnable task) {
        if (!(task instanceof Future<?>)) {
            return () -> "task " + task;
        }
        String before;
        try {
            before = task.toString(); // read apart only where the task left something open
        } catch (Throwable e) { // the application's code: the warning says so, and the task runs all the same
            return () -> "task whose description failed (" + e + ")";
        }
        return () -> "task " + submitted(before);
    }

    /** The submitted Callable or Runnable in a FutureTask's description, unwrapped from the JDK's adapter; else the whole. */
    private static String submitted(String description) {
        Matcher future = NOT_COMPLETED.matcher(description);
        if (!future.matches()) {
            return description;
        }
        Matcher adapter = RUNNABLE_ADAPTER.matcher(future.group(1));
        return adapter.matches() ? adapter.group(1) : future.group(1);
    }
}
