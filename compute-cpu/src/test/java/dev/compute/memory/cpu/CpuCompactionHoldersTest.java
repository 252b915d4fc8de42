package dev.compute.memory.cpu;

import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.UnifiedMemoryManagerBuilder;
import dev.compute.memory.contract.CompactionHoldersContractTest;
import java.time.Duration;

/** Compaction against a buffer's other holders on the CPU backend (expandable ranges, one copy of the data). */
class CpuCompactionHoldersTest extends CompactionHoldersContractTest {
    @Override
    protected UnifiedMemoryManagerBuilder builder() {
        return UnifiedMemoryManager.builder().backend("cpu").timelineInterval(Duration.ZERO);
    }
}
