package dev.compute.memory.cpu;

import dev.compute.memory.contract.Issue25MappedFileSafetyContractTest;

/** Issue 25's adversarial mapped-file scenarios on the CPU backend, each in a JVM of its own. */
class CpuIssue25MappedFileSafetyTest extends Issue25MappedFileSafetyContractTest {
    @Override
    protected String backend() {
        return "cpu";
    }
}
