package dev.compute.memory.opencl;

import dev.compute.memory.contract.CompactionCallerSafetyContractTest;
import org.junit.jupiter.api.BeforeEach;

/** Compactions, trims and cache releases at once among users on the OpenCL device at hand, in a JVM of its own. */
class OpenClCompactionCallerSafetyTest extends CompactionCallerSafetyContractTest {
    @BeforeEach
    void requireOpenCl() {
        OpenClTestSupport.requireOpenCl();
    }

    @Override
    protected String backend() {
        return "opencl";
    }
}
