package dev.compute.memory.opencl;

import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.UnifiedMemoryManagerBuilder;
import dev.compute.memory.contract.BudgetAllocationFormsContractTest;
import java.time.Duration;

/** The contract of the allocation forms through a budget on the OpenCL device at hand (plain segments of cl_mem buffers). */
class OpenClBudgetAllocationFormsTest extends BudgetAllocationFormsContractTest {
    @Override
    protected UnifiedMemoryManagerBuilder builder() {
        OpenClTestSupport.requireOpenCl();
        return UnifiedMemoryManager.builder().backend("opencl").timelineInterval(Duration.ZERO);
    }
}
