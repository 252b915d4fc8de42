package dev.compute.memory.opencl;

import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.contract.BackendContractTest;
import java.time.Duration;

/** The backend contract on the OpenCL device at hand, through a manager built by name as a user builds it. */
class OpenClBackendContractTest extends BackendContractTest {
    @Override
    protected UnifiedMemoryManager newManager() {
        OpenClTestSupport.requireOpenCl();
        return UnifiedMemoryManager.builder().backend("opencl").leakDetection(LeakDetectionLevel.PARANOID)
                .timelineInterval(Duration.ZERO).build();
    }
}
