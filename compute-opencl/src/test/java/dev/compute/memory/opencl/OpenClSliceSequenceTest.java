package dev.compute.memory.opencl;

import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.contract.SliceSequenceContractTest;
import java.time.Duration;
import java.util.Set;
import java.util.stream.Collectors;

/** Slice sequences on the OpenCL device at hand (PoCL in CI): sub-buffers, staged unaligned slices, host-memory buffers. */
class OpenClSliceSequenceTest extends SliceSequenceContractTest {
    @Override
    protected UnifiedMemoryManager newManager() {
        OpenClTestSupport.requireOpenCl();
        return UnifiedMemoryManager.builder().backend("opencl").timelineInterval(Duration.ZERO).build();
    }

    /** Every location but HOST, which is plain host memory and no OpenCL buffer. */
    @Override
    protected Set<MemoryLocation> kernelLocations(UnifiedMemoryManager manager) {
        return manager.locations().stream().filter(location -> location != MemoryLocation.HOST).collect(Collectors.toSet());
    }
}
