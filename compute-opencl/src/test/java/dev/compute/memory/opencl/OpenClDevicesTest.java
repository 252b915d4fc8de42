package dev.compute.memory.opencl;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.List;
import org.junit.jupiter.api.Test;

/** The reasons given where OpenCL itself is missing: these need no platform, so they run everywhere. */
class OpenClDevicesTest {

    @Test
    void aMissingIcdLoaderIsAReasonThatSaysWhatToInstall() {
        OpenClDevices.Choice choice = OpenClDevices.choose(OpenClTestSupport.defaultSettings(), () -> {
            throw new UnsatisfiedLinkError("Could not initialize native OpenCL library. Implementation library could not be loaded");
        });
        assertThat(choice.device()).isNull();
        assertThat(choice.detail()).contains("ICD loader could not be loaded", "Implementation library could not be loaded",
                "ocl-icd-libopencl1", "pocl-opencl-icd");
        OpenClDevices.Choice again = OpenClDevices.choose(OpenClTestSupport.defaultSettings(), () -> {
            throw new NoClassDefFoundError("Could not initialize class org.jocl.CL");
        });
        assertThat(again.device()).isNull();
        assertThat(again.detail()).contains("ICD loader could not be loaded");
    }

    @Test
    void noPlatformAtAllIsAReasonThatSaysWhereTheyAreLookedFor() {
        OpenClDevices.Choice choice = OpenClDevices.choose(OpenClTestSupport.defaultSettings(), List::of);
        assertThat(choice.device()).isNull();
        assertThat(choice.detail()).contains("no OpenCL platform is installed", "/etc/OpenCL/vendors");
    }

    @Test
    void deviceTypesAreParsedIgnoringCaseAndBlankMeansAll() {
        assertThat(OpenClDevices.parseDeviceType("GPU")).isEqualTo(org.jocl.CL.CL_DEVICE_TYPE_GPU);
        assertThat(OpenClDevices.parseDeviceType("")).isEqualTo(org.jocl.CL.CL_DEVICE_TYPE_ALL);
        assertThat(OpenClDevices.parseDeviceType("accelerator")).isEqualTo(org.jocl.CL.CL_DEVICE_TYPE_ACCELERATOR);
        assertThatThrownBy(() -> OpenClDevices.parseDeviceType("fpga")).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("'fpga'");
    }
}
