package dev.compute.memory.opencl;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.spi.BackendSettings;
import java.util.List;
import java.util.Map;
import org.jocl.CL;
import org.jocl.cl_device_id;
import org.jocl.cl_platform_id;
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

    /** Two platforms as a machine with an NVIDIA GPU and PoCL shows them ({@code clinfo -l}: platform #0 and #1). */
    private static final List<OpenClDevice> TWO_PLATFORMS = List.of(
            new OpenClDevice(new cl_platform_id(), 0, "NVIDIA CUDA", "NVIDIA Corporation", new cl_device_id(), "NVIDIA H100",
                    CL.CL_DEVICE_TYPE_GPU, "OpenCL 3.0 CUDA"),
            new OpenClDevice(new cl_platform_id(), 1, "Portable Computing Language", "The pocl project", new cl_device_id(),
                    "cpu-haswell", CL.CL_DEVICE_TYPE_CPU, "OpenCL 3.0 PoCL"));

    private static OpenClDevices.Choice choose(String platform) {
        return OpenClDevices.choose(new BackendSettings(0, true, BackendSettings.DEFAULT_STAGING_BUFFER_BYTES,
                Map.of(OpenClBackendProvider.PLATFORM_OPTION, platform)), () -> TWO_PLATFORMS);
    }

    @Test
    void poclIsFoundByItsVendorThoughItsNameIsPortableComputingLanguage() {
        assertThat(choose("pocl").device()).isSameAs(TWO_PLATFORMS.get(1));
        assertThat(choose("PoCL").device()).isSameAs(TWO_PLATFORMS.get(1));
        assertThat(choose("portable").device()).isSameAs(TWO_PLATFORMS.get(1));
        assertThat(choose("nvidia").device()).isSameAs(TWO_PLATFORMS.get(0));
    }

    @Test
    void aWholeNumberIsThePlatformsIndexAsClinfoNumbersThem() {
        assertThat(choose("1").device()).isSameAs(TWO_PLATFORMS.get(1));
        assertThat(choose("0").device()).isSameAs(TWO_PLATFORMS.get(0));
        OpenClDevices.Choice none = choose("2");
        assertThat(none.device()).isNull();
        assertThat(none.detail()).contains("no OpenCL platform with devices has index 2",
                "NVIDIA CUDA (index 0, vendor NVIDIA Corporation)", "Portable Computing Language (index 1, vendor The pocl project)");
    }

    @Test
    void aFragmentThatMatchesNeitherNameNorVendorListsThePlatforms() {
        OpenClDevices.Choice none = choose("intel");
        assertThat(none.device()).isNull();
        assertThat(none.detail()).startsWith("no OpenCL platform's name or vendor contains 'intel' (platform option); platforms found: [NVIDIA CUDA");
    }
}
