package dev.compute.memory.opencl;

import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.UnifiedMemoryManagerBuilder;
import dev.compute.memory.contract.CompactionContractTest;
import java.time.Duration;

/** Compaction on the OpenCL device at hand (plain segments: moves empty the sparsest cl_mem buffers, which go back whole). */
class OpenClCompactionTest extends CompactionContractTest {
    @Override
    protected UnifiedMemoryManagerBuilder builder() {
        OpenClTestSupport.requireOpenCl();
        return UnifiedMemoryManager.builder().backend("opencl").timelineInterval(Duration.ZERO);
    }
}
