package dev.compute.boot.scope;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.boot.ComputeBudgets;
import dev.compute.memory.MemoryBudget;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.FutureTask;
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

    /** A task whose tenant closed before it ran (a budget of one's own, closed by the application) still runs, so a Future on it ends. */
    @Test
    void aTaskWhoseTenantClosedBeforeItRanStillEndsItsFuture() {
        MemoryBudget gold = manager.budget("gold", 8 << 20);
        budgets.add("default", gold, 2 << 20);
        FutureTask<Boolean> allocates = new FutureTask<>(() -> {
            try (UnifiedBuffer buffer = BudgetScope.current().orElseThrow().allocate(4096, MemoryLocation.HOST)) {
                return true;
            }
        });
        FutureTask<String> allocatesNothing = new FutureTask<>(() -> "done");
        Runnable first;
        Runnable second;
        try (BudgetScope scope = BudgetScope.open(gold)) {
            first = decorator.decorate(allocates);
            second = decorator.decorate(allocatesNothing);
        }
        gold.close();
        Thread.startVirtualThread(first);
        Thread.startVirtualThread(second);

        assertThat(allocates).as("refused by its closed tenant, not left waiting").failsWithin(Duration.ofSeconds(10))
                .withThrowableOfType(ExecutionException.class).withCauseInstanceOf(IllegalStateException.class);
        assertThat(allocatesNothing).succeedsWithin(Duration.ofSeconds(10)).isEqualTo("done");
        assertThat(manager.statistics(MemoryLocation.HOST).allocatedBytes()).isZero();
    }
}
