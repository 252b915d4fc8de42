package dev.compute.boot.scope;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.boot.ComputeBudgets;
import dev.compute.memory.MemoryBudget;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedMemoryManager;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The task's budget is closed however the task ends. Its description for the log ("task " + task) is made in the
 * finally block, before the close: a task whose toString() throws (an application's Runnable, or a FutureTask that
 * prints its Callable) leaves its budget, and the buffers it forgot, open under the tenant for good, and the task's own
 * failure is replaced by the toString()'s.
 */
class TaskBudgetDescriptionTests {

    private final UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend("cpu").build();
    private final ComputeBudgets budgets = new ComputeBudgets();
    private final MemoryBudget tenant = manager.budget("tenant-a", 8 << 20);
    private final TaskBudgetDecorator decorator;

    TaskBudgetDescriptionTests() {
        budgets.add("default", tenant, 2 << 20);
        decorator = new TaskBudgetDecorator(new ScopedBudgets(budgets));
    }

    @AfterEach
    void close() {
        manager.close();
    }

    @Test
    void aTaskWhoseToStringThrowsStillHasItsBudgetClosed() {
        Runnable task = new Runnable() {
            @Override
            public void run() {
                BudgetScope.current().orElseThrow().allocate(4096, MemoryLocation.HOST); // forgotten
                throw new IllegalStateException("the task's own failure");
            }

            @Override
            public String toString() {
                throw new UnsupportedOperationException("toString");
            }
        };
        Runnable decorated;
        try (MemoryBudget request = tenant.child("request-1", 1 << 20); BudgetScope scope = BudgetScope.open(request)) {
            decorated = decorator.decorate(task);
        }
        assertThatThrownBy(decorated::run).as("the task's own failure").hasMessage("the task's own failure");
        assertThat(tenant.children()).as("the task's budget is closed").isEmpty();
        assertThat(tenant.statistics().allocatedBytes()).isZero();
    }
}
