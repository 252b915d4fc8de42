package dev.compute.memory.cpu;

import dev.compute.memory.contract.MappedFileRaceContractTest;

/** Issue 25's adversarial mapped-file scenarios on the CPU backend, each in a JVM of its own. */
class CpuMappedFileRaceTest extends MappedFileRaceContractTest {
    @Override
    protected String backend() {
        return "cpu";
    }
}
