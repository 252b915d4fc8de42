package dev.compute.memory.cpu;

import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.UnifiedMemoryManagerBuilder;
import dev.compute.memory.contract.BudgetAllocationFormsContractTest;
import java.time.Duration;

/** The contract of the allocation forms through a budget on the CPU backend (expandable ranges). */
class CpuBudgetAllocationFormsTest extends BudgetAllocationFormsContractTest {
    @Override
    protected UnifiedMemoryManagerBuilder builder() {
        return UnifiedMemoryManager.builder().backend("cpu").timelineInterval(Duration.ZERO);
    }
}
