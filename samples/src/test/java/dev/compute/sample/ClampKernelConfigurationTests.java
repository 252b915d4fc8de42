package dev.compute.sample;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** Which clamp kernel each backend gets. */
class ClampKernelConfigurationTests {

    @Test
    void theCpuBackendRunsItsOwnKernelOnTheDeviceAccess() {
        assertThat(ClampKernelConfiguration.forBackend("cpu")).isInstanceOf(CpuClampKernel.class);
    }

    @Test
    void theOpenClBackendRunsItsOwnKernelOnTheHandle() {
        assertThat(ClampKernelConfiguration.forBackend("opencl")).isInstanceOf(OpenClClampKernel.class);
    }

    @Test
    void aBackendWithoutAKernelOfOurOwnRunsOnTheHostCopy() {
        assertThat(ClampKernelConfiguration.forBackend("cuda")).isInstanceOf(HostCopyClampKernel.class);
    }
}
