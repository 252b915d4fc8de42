package dev.compute.memory.cpu;

import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.UnifiedMemoryManagerBuilder;
import dev.compute.memory.contract.CompactionContractTest;
import java.time.Duration;

/** Compaction on the CPU backend (expandable ranges: moves pack a range low, and the pages above are given back). */
class CpuCompactionTest extends CompactionContractTest {
    @Override
    protected UnifiedMemoryManagerBuilder builder() {
        return UnifiedMemoryManager.builder().backend("cpu").timelineInterval(Duration.ZERO);
    }
}
