package dev.compute.memory.opencl;

import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.UnifiedMemoryManagerBuilder;
import dev.compute.memory.contract.BudgetContractTest;
import java.time.Duration;

/** The budget contract on the OpenCL device at hand (plain segments of cl_mem buffers). */
class OpenClBudgetTest extends BudgetContractTest {
    @Override
    protected UnifiedMemoryManagerBuilder builder() {
        OpenClTestSupport.requireOpenCl();
        return UnifiedMemoryManager.builder().backend("opencl").timelineInterval(Duration.ZERO);
    }
}
