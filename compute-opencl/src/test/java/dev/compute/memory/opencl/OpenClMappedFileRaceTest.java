package dev.compute.memory.opencl;

import dev.compute.memory.contract.MappedFileRaceContractTest;

/** Issue 25's adversarial mapped-file scenarios on the OpenCL device at hand: here a driver reading a truncated mapping would end the process. */
class OpenClMappedFileRaceTest extends MappedFileRaceContractTest {
    @Override
    protected String backend() {
        return "opencl";
    }

    @Override
    protected void assumeBackend() {
        OpenClTestSupport.requireOpenCl();
    }
}
