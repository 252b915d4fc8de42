package dev.compute.memory.opencl;

import dev.compute.memory.contract.MappedFileSafetyContractTest;

/**
 * The mapped-file scenarios on the OpenCL device at hand, each in a JVM of its own: here a kernel or the driver writing
 * a read-only mapping, or reading a truncated one, would end the process.
 */
class OpenClMappedFileSafetyTest extends MappedFileSafetyContractTest {
    @Override
    protected String backend() {
        return "opencl";
    }

    @Override
    protected void assumeBackend() {
        OpenClTestSupport.requireOpenCl();
    }
}
