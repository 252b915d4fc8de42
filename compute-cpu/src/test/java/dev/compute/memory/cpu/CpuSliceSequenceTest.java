package dev.compute.memory.cpu;

import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.contract.SliceSequenceContractTest;
import java.time.Duration;

/** Slice sequences on the CPU backend: one copy, Java kernels over the memory itself. */
class CpuSliceSequenceTest extends SliceSequenceContractTest {
    @Override
    protected UnifiedMemoryManager newManager() {
        return UnifiedMemoryManager.builder().backend("cpu").timelineInterval(Duration.ZERO).build();
    }
}
