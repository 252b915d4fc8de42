package dev.compute.memory.opencl;

import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.UnifiedMemoryManagerBuilder;
import dev.compute.memory.contract.AllocationContractTest;
import java.time.Duration;

/** The allocation contract on the OpenCL device at hand (plain segments of cl_mem buffers). */
class OpenClAllocationTest extends AllocationContractTest {
    @Override
    protected UnifiedMemoryManagerBuilder builder() {
        OpenClTestSupport.requireOpenCl();
        return UnifiedMemoryManager.builder().backend("opencl").timelineInterval(Duration.ZERO);
    }
}
