package dev.compute.memory.opencl;

import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.UnifiedMemoryManagerBuilder;
import dev.compute.memory.contract.MappedFileContractTest;

/**
 * Mapped files on the OpenCL device at hand, chosen by name as a user would: copies to DEVICE buffers go through the
 * backend's staging buffer, chunk by chunk; ops read the mapping in place through {@code CL_MEM_USE_HOST_PTR}.
 */
class OpenClMappedFileContractTest extends MappedFileContractTest {
    @Override
    protected UnifiedMemoryManagerBuilder builder() {
        OpenClTestSupport.requireOpenCl();
        return UnifiedMemoryManager.builder().backend("opencl");
    }
}
