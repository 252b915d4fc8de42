package dev.compute.boot.scope;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.boot.ComputeBudgets;
import dev.compute.memory.MemoryBudget;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedMemoryManager;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;

@ExtendWith(OutputCaptureExtension.class)
class TaskBudgetDecoratorTests {

    private final UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend("cpu").build();
    private final ComputeBudgets budgets = new ComputeBudgets();
    private final MemoryBudget tenant = manager.budget("tenant-a", 8 << 20);
    private final TaskBudgetDecorator decorator;

    TaskBudgetDecoratorTests() {
        budgets.add("default", tenant, 2 << 20);
        decorator = new TaskBudgetDecorator(new ScopedBudgets(budgets));
    }

    @AfterEach
    void close() {
        manager.close();
    }

    @Test
    void aTaskSubmittedInARequestRunsInABudgetOfItsOwnUnderTheTenantNotTheRequest(CapturedOutput output) throws Exception {
        AtomicReference<MemoryBudget> during = new AtomicReference<>();
        Runnable task;
        try (MemoryBudget request = tenant.child("request-1", 1 << 20); BudgetScope scope = BudgetScope.open(request)) {
            task = decorator.decorate(() -> {
                MemoryBudget budget = BudgetScope.current().orElseThrow();
                during.set(budget);
                budget.allocate(4096, MemoryLocation.HOST); // forgotten
            });
        }
        CompletableFuture.runAsync(task, Thread::startVirtualThread).get(10, TimeUnit.SECONDS); // after the request closed

        assertThat(during.get().path()).matches("tenant-a/task-\\d+");
        assertThat(during.get().limitBytes()).isEqualTo(2 << 20);
        assertThat(during.get().isClosed()).isTrue();
        assertThat(tenant.statistics().allocatedBytes()).isZero();
        assertThat(output).contains("ended with 1 buffer(s) of 4096 bytes still open in memory budget '" + during.get().path() + "'");
    }

    @Test
    void aTaskSubmittedWhereNoBudgetIsCurrentRunsAsItIs() {
        Runnable task = () -> {};
        assertThat(decorator.decorate(task)).isSameAs(task);
    }

    /** The work is described only where it left something open, and a description that throws keeps nothing open. */
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
