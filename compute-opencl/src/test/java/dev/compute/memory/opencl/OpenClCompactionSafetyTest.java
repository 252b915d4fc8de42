package dev.compute.memory.opencl;

import dev.compute.memory.contract.CompactionSafetyContractTest;

/** The compaction races on the OpenCL device at hand, each in a JVM of its own. */
class OpenClCompactionSafetyTest extends CompactionSafetyContractTest {
    @Override
    protected String backend() {
        return "opencl";
    }

    @Override
    protected void assumeBackend() {
        OpenClTestSupport.requireOpenCl();
    }
}
