package dev.compute.boot.scope;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.compute.boot.ComputeBudgets;
import dev.compute.memory.MemoryBudget;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import java.time.Duration;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.FutureTask;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.scheduling.concurrent.ThreadPoolTaskExecutor;

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

    /**
     * An executor's {@code submit} hands the decorator a FutureTask, which forgets its Callable once run: the warning
     * named "task java.util.concurrent.FutureTask@1a2b[Completed normally]", nothing the application can find. It names
     * the submitted Callable or Runnable now.
     */
    @Test
    void aSubmittedTaskThatLeftBuffersOpenIsNamedByWhatWasSubmitted(CapturedOutput output) throws Exception {
        ThreadPoolTaskExecutor executor = new ThreadPoolTaskExecutor();
        executor.setTaskDecorator(decorator);
        executor.initialize();
        try {
            Future<?> callable;
            Future<?> runnable;
            try (MemoryBudget request = tenant.child("request-1", 1 << 20); BudgetScope scope = BudgetScope.open(request)) {
                callable = executor.submit((Callable<Boolean>) new ForgetfulReport());
                runnable = executor.submit((Runnable) new ForgetfulReport());
            }
            callable.get(10, TimeUnit.SECONDS);
            runnable.get(10, TimeUnit.SECONDS);
        } finally {
            executor.shutdown();
        }
        // said as each task's budget closes, after its future completed
        await().atMost(Duration.ofSeconds(10)).untilAsserted(() -> assertThat(output.toString().split("task forgetful report ended with 1 buffer\\(s\\) of 4096 bytes", -1))
                .as("both tasks' warnings").hasSize(3));
        assertThat(output).doesNotContain("FutureTask");
    }

    private static final class ForgetfulReport implements Callable<Boolean>, Runnable {
        @Override
        public Boolean call() {
            BudgetScope.current().orElseThrow().allocate(4096, MemoryLocation.HOST); // forgotten
            return true;
        }

        @Override
        public void run() {
            call();
        }

        @Override
        public String toString() {
            return "forgetful report";
        }
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

    /** A task run as it was handed over ({@code execute}) is described only where it left something open. */
    @Test
    void aTaskThatLeavesNothingOpenIsNeverDescribed() {
        AtomicInteger described = new AtomicInteger();
        Runnable task = new Runnable() {
            @Override
            public void run() {
                BudgetScope.current().orElseThrow().allocate(4096, MemoryLocation.HOST).close();
            }

            @Override
            public String toString() {
                described.incrementAndGet();
                return "costly";
            }
        };
        Runnable decorated;
        try (MemoryBudget request = tenant.child("request-1", 1 << 20); BudgetScope scope = BudgetScope.open(request)) {
            decorated = decorator.decorate(task);
        }
        decorated.run();
        assertThat(described).hasValue(0);
    }

    /**
     * A submitted task ({@code submit}: a FutureTask, which forgets what was submitted as it completes) is described
     * before it runs; a description that throws keeps it from neither running nor having its budget closed.
     */
    @Test
    void aSubmittedTaskWhoseToStringThrowsRunsAndHasItsBudgetClosed(CapturedOutput output) throws Exception {
        ThreadPoolTaskExecutor executor = new ThreadPoolTaskExecutor();
        executor.setTaskDecorator(decorator);
        executor.initialize();
        try {
            Future<Boolean> submitted;
            try (MemoryBudget request = tenant.child("request-1", 1 << 20); BudgetScope scope = BudgetScope.open(request)) {
                submitted = executor.submit(new Callable<>() {
                    @Override
                    public Boolean call() {
                        BudgetScope.current().orElseThrow().allocate(4096, MemoryLocation.HOST); // forgotten
                        return true;
                    }

                    @Override
                    public String toString() {
                        throw new UnsupportedOperationException("toString");
                    }
                });
            }
            assertThat(submitted.get(10, TimeUnit.SECONDS)).isTrue();
        } finally {
            executor.shutdown();
        }
        await().atMost(Duration.ofSeconds(10)).untilAsserted(() -> {
            assertThat(tenant.children()).as("the task's budget is closed").isEmpty();
            assertThat(output).contains("task whose description failed (java.lang.UnsupportedOperationException: toString) ended with 1 buffer(s)");
        });
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
