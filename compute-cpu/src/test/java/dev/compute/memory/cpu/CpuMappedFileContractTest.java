package dev.compute.memory.cpu;

import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.UnifiedMemoryManagerBuilder;
import dev.compute.memory.contract.MappedFileContractTest;

/** Mapped files on the CPU backend, chosen by name as a user would. */
class CpuMappedFileContractTest extends MappedFileContractTest {
    @Override
    protected UnifiedMemoryManagerBuilder builder() {
        return UnifiedMemoryManager.builder().backend("cpu");
    }
}
