package dev.compute.memory.opencl;

import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.contract.BufferLifetimeContractTest;
import java.time.Duration;

/** The lifetime rule on the OpenCL device at hand: DEVICE memory the host reaches only through a mirror. */
class OpenClBufferLifetimeTest extends BufferLifetimeContractTest {
    @Override
    protected UnifiedMemoryManager newManager() {
        OpenClTestSupport.requireOpenCl();
        return UnifiedMemoryManager.builder().backend("opencl").leakDetection(LeakDetectionLevel.PARANOID)
                .timelineInterval(Duration.ZERO).build();
    }
}
