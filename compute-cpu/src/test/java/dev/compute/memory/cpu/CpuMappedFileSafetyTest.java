package dev.compute.memory.cpu;

import dev.compute.memory.contract.MappedFileSafetyContractTest;

/** The mapped-file scenarios on the CPU backend, each in a JVM of its own. */
class CpuMappedFileSafetyTest extends MappedFileSafetyContractTest {
    @Override
    protected String backend() {
        return "cpu";
    }
}
