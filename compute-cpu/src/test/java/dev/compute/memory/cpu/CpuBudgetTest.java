package dev.compute.memory.cpu;

import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.UnifiedMemoryManagerBuilder;
import dev.compute.memory.contract.BudgetContractTest;
import java.time.Duration;

/** The budget contract on the CPU backend (expandable ranges). */
class CpuBudgetTest extends BudgetContractTest {
    @Override
    protected UnifiedMemoryManagerBuilder builder() {
        return UnifiedMemoryManager.builder().backend("cpu").timelineInterval(Duration.ZERO);
    }
}
