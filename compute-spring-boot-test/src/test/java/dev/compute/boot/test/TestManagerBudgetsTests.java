package dev.compute.boot.test;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.boot.ComputeBudgets;
import dev.compute.memory.MemoryBudget;
import dev.compute.memory.UnifiedMemoryManager;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;

/**
 * An application with tenants (compute.budgets) tested with the test module's manager: the test sets its own budgets
 * under spring.test.compute.budgets, as README says spring.test.compute.* "has the keys of compute.*".
 */
@SpringBootTest(classes = TestManagerBudgetsTests.App.class, properties = {"compute.backend=cpu",
        "compute.budgets.search.limit=8MB", "compute.scopes.request-budgets=true",
        "spring.test.compute.budgets.search.limit=4MB"})
@AutoConfigureComputeMemory
class TestManagerBudgetsTests {

    @SpringBootConfiguration
    @EnableAutoConfiguration
    static class App {}

    @Autowired
    UnifiedMemoryManager manager;

    @Autowired
    ComputeBudgets budgets;

    @Test
    void theTestManagerHasTheBudgetsTheTestSets() {
        assertThat(budgets.budget("search")).as("spring.test.compute.budgets.search").isPresent();
        assertThat(budgets.budget("search").orElseThrow().limitBytes()).isEqualTo(4L << 20);
    }
}
