package dev.compute.memory.cpu;

import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.UnifiedMemoryManagerBuilder;
import dev.compute.memory.contract.AllocationContractTest;
import java.time.Duration;

/** The allocation contract on the CPU backend (expandable ranges), chosen by name as a user would. */
class CpuAllocationTest extends AllocationContractTest {
    @Override
    protected UnifiedMemoryManagerBuilder builder() {
        return UnifiedMemoryManager.builder().backend("cpu").timelineInterval(Duration.ZERO);
    }
}
