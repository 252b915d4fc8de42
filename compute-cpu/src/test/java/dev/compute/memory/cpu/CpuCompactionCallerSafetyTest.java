package dev.compute.memory.cpu;

import dev.compute.memory.contract.CompactionCallerSafetyContractTest;

/** Compactions, trims and cache releases at once among users on the CPU backend, in a JVM of its own. */
class CpuCompactionCallerSafetyTest extends CompactionCallerSafetyContractTest {
    @Override
    protected String backend() {
        return "cpu";
    }
}
