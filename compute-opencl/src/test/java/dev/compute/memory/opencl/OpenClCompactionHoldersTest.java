package dev.compute.memory.opencl;

import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.UnifiedMemoryManagerBuilder;
import dev.compute.memory.contract.CompactionHoldersContractTest;
import java.time.Duration;

/** Compaction against a buffer's other holders on the OpenCL device at hand (kernels and copies on its queue). */
class OpenClCompactionHoldersTest extends CompactionHoldersContractTest {
    @Override
    protected UnifiedMemoryManagerBuilder builder() {
        OpenClTestSupport.requireOpenCl();
        return UnifiedMemoryManager.builder().backend("opencl").timelineInterval(Duration.ZERO);
    }
}
