package dev.compute.memory.contract;

/** The compaction callers' scenarios on the simulated discrete device, whose host views need host mirrors. */
class SimulatedCompactionCallerSafetyTest extends CompactionCallerSafetyContractTest {
    @Override
    protected String backend() {
        return "simulated";
    }
}
