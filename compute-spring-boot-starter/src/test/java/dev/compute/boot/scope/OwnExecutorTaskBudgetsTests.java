package dev.compute.boot.scope;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.compute.boot.ComputeBudgets;
import dev.compute.memory.MemoryBudget;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.core.task.support.CompositeTaskDecorator;
import org.springframework.scheduling.concurrent.ThreadPoolTaskExecutor;

/**
 * An executor the application makes with {@code new} gets none of Boot's task decorators: its tasks run in no budget
 * of their own, until the starter's decorators are set on it as the README says.
 */
@SpringBootTest(classes = OwnExecutorTaskBudgetsTests.Application.class, properties = {"compute.backend=cpu",
        "compute.budgets.tenant-a.limit=8MB", "compute.budgets.tenant-a.request-limit=1MB", "compute.scopes.task-budgets=true"})
class OwnExecutorTaskBudgetsTests {

    @Autowired
    ComputeBudgets budgets;

    @Autowired
    ThreadPoolTaskExecutor undecorated;

    @Autowired
    ThreadPoolTaskExecutor decorated;

    @Test
    void itsTasksRunInBudgetsOfTheirOwnOnlyWithTheStartersDecoratorsSetOnIt() throws Exception {
        MemoryBudget tenant = budgets.budget("tenant-a").orElseThrow();
        Optional<MemoryBudget> withoutDecorators;
        Optional<MemoryBudget> withThem;
        try (BudgetScope scope = BudgetScope.open(tenant)) {
            withoutDecorators = undecorated.submit(BudgetScope::current).get(10, TimeUnit.SECONDS);
            withThem = decorated.submit(BudgetScope::current).get(10, TimeUnit.SECONDS);
        }

        assertThat(withoutDecorators).isEmpty();
        assertThat(withThem).hasValueSatisfying(budget -> {
            assertThat(budget.path()).matches("tenant-a/task-\\d+");
            assertThat(budget.limitBytes()).isEqualTo(1L << 20);
            // closed as the task returns, which may be just after its Future has its value
            await().atMost(Duration.ofSeconds(10)).until(budget::isClosed);
        });
    }

    @SpringBootConfiguration
    @EnableAutoConfiguration
    static class Application {
        @Bean
        ThreadPoolTaskExecutor undecorated() {
            return new ThreadPoolTaskExecutor();
        }

        @Bean
        ThreadPoolTaskExecutor decorated(TaskBudgetDecorator taskBudgets) {
            ThreadPoolTaskExecutor executor = new ThreadPoolTaskExecutor();
            executor.setTaskDecorator(new CompositeTaskDecorator(List.of(new TaskScopeDecorator(), taskBudgets)));
            return executor;
        }
    }
}
