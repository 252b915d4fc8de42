package dev.compute.memory.contract;

/** The compaction races on the simulated discrete device, each in a JVM of its own. */
class SimulatedCompactionSafetyTest extends CompactionSafetyContractTest {
    @Override
    protected String backend() {
        return "simulated";
    }
}
