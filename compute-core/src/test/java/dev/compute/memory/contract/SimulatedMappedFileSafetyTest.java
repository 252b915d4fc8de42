package dev.compute.memory.contract;

/** The mapped-file scenarios on the simulated discrete device, each in a JVM of its own. */
class SimulatedMappedFileSafetyTest extends MappedFileSafetyContractTest {
    @Override
    protected String backend() {
        return "simulated";
    }
}
