package dev.compute.memory.contract;

import org.junit.jupiter.api.Test;

/** The compaction callers' scenarios on the simulated discrete device, whose host views need host mirrors. */
class SimulatedCompactionCallerSafetyTest extends CompactionCallerSafetyContractTest {
    @Override
    protected String backend() {
        return "simulated";
    }

    @Test
    void outOfMemoryHandlersThatCompactWhileTheirMirrorsAreAskedForDoNotWaitOnEachOther() throws Exception {
        assertScenarioPasses(backend(), "outOfMemoryHandlersThatCompact");
    }
}
