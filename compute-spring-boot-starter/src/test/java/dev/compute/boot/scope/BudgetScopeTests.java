package dev.compute.boot.scope;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.MemoryBudget;
import dev.compute.memory.UnifiedMemoryManager;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

class BudgetScopeTests {

    private final UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend("cpu").build();

    @AfterEach
    void close() {
        manager.close();
    }

    @Test
    void scopesNestAndEachPutsBackTheBudgetCurrentBeforeIt() {
        MemoryBudget tenant = manager.budget("tenant", 1 << 20);
        MemoryBudget request = tenant.child("request", 1 << 20);
        assertThat(BudgetScope.current()).isEmpty();

        try (BudgetScope outer = BudgetScope.open(tenant)) {
            try (BudgetScope inner = BudgetScope.open(request)) {
                assertThat(BudgetScope.current()).containsSame(request);
            }
            assertThat(BudgetScope.current()).containsSame(tenant);
        }
        assertThat(BudgetScope.current()).isEmpty();
        assertThat(tenant.isClosed()).as("a scope does not close its budget").isFalse();
    }

    @Test
    void aScopeIsClosedOnItsOwnThreadAndOtherThreadsDoNotSeeIt() throws Exception {
        try (BudgetScope scope = BudgetScope.open(manager.budget("tenant", 1 << 20))) {
            CompletableFuture<Boolean> seen = CompletableFuture.supplyAsync(() -> BudgetScope.current().isPresent(), Thread::startVirtualThread);
            assertThat(seen.get(10, TimeUnit.SECONDS)).isFalse();
            Throwable elsewhere = CompletableFuture.supplyAsync(() -> {
                try {
                    scope.close();
                    return null;
                } catch (WrongThreadException e) {
                    return e;
                }
            }, Thread::startVirtualThread).get(10, TimeUnit.SECONDS);
            assertThat(elsewhere).isInstanceOf(WrongThreadException.class);
        }
        assertThatThrownBy(() -> BudgetScope.current().orElseThrow()).isInstanceOf(java.util.NoSuchElementException.class);
    }
}
