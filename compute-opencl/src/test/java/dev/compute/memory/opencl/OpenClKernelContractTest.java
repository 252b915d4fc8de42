package dev.compute.memory.opencl;

import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.contract.KernelContractTest;
import java.time.Duration;
import java.util.Set;
import java.util.stream.Collectors;

/**
 * One's own OpenCL C kernels on the device at hand (PoCL in CI): on sub-buffers, on unaligned slices staged through
 * a temporary buffer, on PINNED memory through a host-memory buffer and on UNIFIED (SVM) memory where the device has it.
 */
class OpenClKernelContractTest extends KernelContractTest {
    @Override
    protected UnifiedMemoryManager newManager() {
        OpenClTestSupport.requireOpenCl();
        return UnifiedMemoryManager.builder().backend("opencl").leakDetection(LeakDetectionLevel.PARANOID)
                .timelineInterval(Duration.ZERO).build();
    }

    /** Every location but HOST, which is plain host memory and no OpenCL buffer. */
    @Override
    protected Set<MemoryLocation> kernelLocations() {
        return manager.locations().stream().filter(location -> location != MemoryLocation.HOST).collect(Collectors.toSet());
    }
}
