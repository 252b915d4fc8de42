package dev.compute.memory.cpu;

import dev.compute.memory.contract.CompactionSafetyContractTest;

/** The compaction races on the CPU backend, each in a JVM of its own: a move under a view's user would crash it. */
class CpuCompactionSafetyTest extends CompactionSafetyContractTest {
    @Override
    protected String backend() {
        return "cpu";
    }
}
