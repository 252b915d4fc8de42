package dev.compute.memory.cuda;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.spi.BackendAvailability;
import org.junit.jupiter.api.Test;

/** What each finding of the driver probe means, in the words a user sees. */
class DriverProbeTest {

    private static DriverProbe.Findings found(int init, int version, int count, int index) {
        return new DriverProbe.Findings(null, init, version, count, index, "NVIDIA H100 80GB HBM3", 90, 0, 0, null);
    }

    @Test
    void aMissingLibraryIsTheReason() {
        BackendAvailability a = DriverProbe.decide(new DriverProbe.Findings("libcuda.so.1 not found (x)", 0, 0, 0, 0, "", 0, 0, 0, null));
        assertThat(a.available()).isFalse();
        assertThat(a.detail()).isEqualTo("libcuda.so.1 not found (x)");
    }

    @Test
    void noDeviceAtInit() {
        BackendAvailability a = DriverProbe.decide(found(100, 0, 0, 0));
        assertThat(a.available()).isFalse();
        assertThat(a.detail()).contains("no CUDA device").contains("CUDA_ERROR_NO_DEVICE (100)");
    }

    @Test
    void anotherInitFailureIsNamed() {
        BackendAvailability a = DriverProbe.decide(found(999, 0, 0, 0));
        assertThat(a.available()).isFalse();
        assertThat(a.detail()).startsWith("cuInit failed: CUDA_ERROR_UNKNOWN (999)");
    }

    @Test
    void aDriverOlderThanCuda12IsTooOld() {
        BackendAvailability a = DriverProbe.decide(found(0, 11080, 1, 0));
        assertThat(a.available()).isFalse();
        assertThat(a.detail()).contains("too old").contains("CUDA 11.8").contains("12.0 or later");
    }

    @Test
    void zeroDevices() {
        BackendAvailability a = DriverProbe.decide(found(0, 12040, 0, 0));
        assertThat(a.available()).isFalse();
        assertThat(a.detail()).contains("no CUDA device");
    }

    @Test
    void aDeviceIndexOutOfRangeSaysWhichExist() {
        assertThat(DriverProbe.decide(found(0, 12040, 1, 1)).detail())
                .isEqualTo("device index 1 is out of range: there is 1 CUDA device (index 0); set compute.device");
        assertThat(DriverProbe.decide(found(0, 12040, 4, 7)).detail())
                .isEqualTo("device index 7 is out of range: there are 4 CUDA devices (0 to 3); set compute.device");
    }

    @Test
    void aGpuBeforeVoltaIsNamedWithItsComputeCapability() {
        BackendAvailability a = DriverProbe.decide(new DriverProbe.Findings(null, 0, 12040, 2, 1, "Tesla P100", 60, 0, 0, null));
        assertThat(a.available()).isFalse();
        assertThat(a.detail()).isEqualTo("device 1 (Tesla P100) has compute capability 6.0; this backend's kernels are PTX for"
                + " compute capability 7.0 (Volta) or later, which the driver cannot compile for it");
        assertThat(DriverProbe.decide(new DriverProbe.Findings(null, 0, 12040, 1, 0, "Tesla V100", 70, 0, 0, null)).available()).isTrue();
        assertThat(DriverProbe.capability(120)).isEqualTo("12.0");
    }

    @Test
    void aDeviceItsComputeModeKeepsFromThisProcessIsNamedWithTheMode() {
        BackendAvailability prohibited = DriverProbe.decide(new DriverProbe.Findings(null, 0, 13000, 2, 1, "NVIDIA A100", 80, 2, 0, null));
        assertThat(prohibited.available()).isFalse();
        assertThat(prohibited.detail()).startsWith("device 1 (NVIDIA A100) is in prohibited compute mode").contains("nvidia-smi -i 1 -c DEFAULT");
        BackendAvailability taken = DriverProbe.decide(new DriverProbe.Findings(null, 0, 13000, 1, 0, "NVIDIA A100", 80, 3, 46, null));
        assertThat(taken.available()).isFalse();
        assertThat(taken.detail()).isEqualTo("device 0 (NVIDIA A100) is in exclusive-process compute mode and its context cannot be"
                + " had here (cuDevicePrimaryCtxRetain: CUDA_ERROR_DEVICE_UNAVAILABLE (46)): another process holds the device (nvidia-smi lists it)");
        assertThat(DriverProbe.decide(new DriverProbe.Findings(null, 0, 13000, 1, 0, "NVIDIA A100", 80, 3, 999, null)).detail())
                .as("another refusal, said as it is").endsWith("(cuDevicePrimaryCtxRetain: CUDA_ERROR_UNKNOWN (999))");
        assertThat(DriverProbe.decide(new DriverProbe.Findings(null, 0, 13000, 1, 0, "NVIDIA A100", 80, 3, 0, null)).available())
                .as("exclusive-process mode, the device free").isTrue();
    }

    @Test
    void missingJcudaNativesAreTheReasonWhenAllElseIsFine() {
        BackendAvailability a = DriverProbe.decide(new DriverProbe.Findings(null, 0, 13000, 1, 0, "GPU", 80, 0, 0, "JCuda's native library did not load"));
        assertThat(a.available()).isFalse();
        assertThat(a.detail()).isEqualTo("JCuda's native library did not load");
    }

    @Test
    void availableSaysDriverAndDevice() {
        BackendAvailability a = DriverProbe.decide(found(0, 13000, 1, 0));
        assertThat(a.available()).isTrue();
        assertThat(a.detail()).isEqualTo("CUDA driver 13.0, 1 device(s); device 0: NVIDIA H100 80GB HBM3");
    }

    @Test
    void versionsReadAsCudaWritesThem() {
        assertThat(DriverProbe.version(12040)).isEqualTo("12.4");
        assertThat(DriverProbe.version(12000)).isEqualTo("12.0");
        assertThat(DriverProbe.version(13000)).isEqualTo("13.0");
        assertThat(DriverProbe.version(11080)).isEqualTo("11.8");
    }
}
