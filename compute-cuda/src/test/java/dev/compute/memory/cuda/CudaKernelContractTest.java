package dev.compute.memory.cuda;

import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.contract.KernelContractTest;
import dev.compute.memory.spi.BackendSettings;
import java.util.Set;
import java.util.stream.Collectors;

/**
 * One's own PTX kernels on a real GPU: on DEVICE, PINNED and UNIFIED memory, slices at any offset (a pointer takes
 * any), launched from many threads, each on its own stream. Skips with the reason where there is no GPU
 * ({@link CudaTestSupport#assumeCuda}); {@code CudaBackendOnFakeDriverTest} runs the same kernels on the stand-in driver.
 */
class CudaKernelContractTest extends KernelContractTest {
    @Override
    protected UnifiedMemoryManager newManager() {
        return CudaTestSupport.managerOn(CudaTestSupport.openBackend(BackendSettings.ofDevice(0))).build();
    }

    /** Every location but HOST, ordinary off-heap memory the device cannot address. */
    @Override
    protected Set<MemoryLocation> kernelLocations() {
        return manager.locations().stream().filter(location -> location != MemoryLocation.HOST).collect(Collectors.toSet());
    }
}
