package dev.compute.memory.opencl;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.spi.BackendAvailability;
import java.util.List;
import org.jocl.CL;
import org.jocl.cl_device_id;
import org.jocl.cl_platform_id;
import org.junit.jupiter.api.Test;

/**
 * A device's properties as the backend reads them, on the device the backend would choose (PoCL here), and what
 * follows from them for any device: UNIFIED memory only with fine-grained SVM, the marker call by OpenCL version.
 */
class OpenClDevicePropertiesTest {

    /** A device as a machine with NVIDIA's OpenCL platform shows it; no OpenCL call is made on it. */
    private static final OpenClDevice GPU = new OpenClDevice(new cl_platform_id(), 0, "NVIDIA CUDA", "NVIDIA Corporation",
            new cl_device_id(), "NVIDIA H100", CL.CL_DEVICE_TYPE_GPU, "OpenCL 3.0 CUDA");

    private static OpenClDeviceProperties withSvm(long capabilities) {
        return new OpenClDeviceProperties(GPU, 256, 1L << 30, 4L << 30, 132, capabilities, true, true);
    }

    @Test
    void theChosenDevicesPropertiesAreReadAsOpenClReportsThem() {
        OpenClTestSupport.requireOpenCl();
        OpenClDevice device = OpenClDevices.choose(OpenClTestSupport.defaultSettings()).device();
        OpenClDeviceProperties properties = OpenClDeviceProperties.read(device);

        assertThat(properties.device()).isSameAs(device);
        long alignBits = OpenClCalls.deviceLong(device.deviceId(), CL.CL_DEVICE_MEM_BASE_ADDR_ALIGN);
        assertThat(properties.alignment()).as("CL_DEVICE_MEM_BASE_ADDR_ALIGN is in bits").isEqualTo(Math.max(1, alignBits / 8));
        assertThat(properties.maxAllocation()).isEqualTo(OpenClCalls.deviceLong(device.deviceId(), CL.CL_DEVICE_MAX_MEM_ALLOC_SIZE))
                .isPositive().isLessThanOrEqualTo(properties.globalMemory());
        assertThat(properties.globalMemory()).isEqualTo(OpenClCalls.deviceLong(device.deviceId(), CL.CL_DEVICE_GLOBAL_MEM_SIZE));
        assertThat(properties.computeUnits()).isPositive();
        assertThat(properties.markersTakeWaitLists()).isEqualTo(OpenClDeviceProperties.openClVersionAtLeast(device.version(), 1, 2));
        boolean fp64 = List.of(OpenClCalls.deviceString(device.deviceId(), CL.CL_DEVICE_EXTENSIONS).split(" ")).contains("cl_khr_fp64");
        if (fp64) {
            assertThat(properties.doublePrecision()).isTrue();
        }
        if (!OpenClDeviceProperties.openClVersionAtLeast(device.version(), 2, 0)) {
            assertThat(properties.svmCapabilities()).as("no SVM query before OpenCL 2.0").isZero();
        }
    }

    @Test
    void unifiedMemoryNeedsFineGrainedBufferSvm() {
        BackendAvailability fine = withSvm(CL.CL_DEVICE_SVM_COARSE_GRAIN_BUFFER | CL.CL_DEVICE_SVM_FINE_GRAIN_BUFFER).unifiedSupport();
        assertThat(fine.available()).isTrue();
        assertThat(fine.detail()).contains("clSVMAlloc");

        BackendAvailability coarse = withSvm(CL.CL_DEVICE_SVM_COARSE_GRAIN_BUFFER).unifiedSupport();
        assertThat(coarse.available()).isFalse();
        assertThat(coarse.detail()).contains("only coarse-grained SVM", "'NVIDIA H100'", "use DEVICE", "PINNED");

        BackendAvailability none = withSvm(0).unifiedSupport();
        assertThat(none.available()).isFalse();
        assertThat(none.detail()).contains("OpenCL 2.0 SVM", "has none", "'NVIDIA H100'");
    }

    @Test
    void deviceVersionsAreComparedByMajorThenMinor() {
        assertThat(OpenClDeviceProperties.openClVersionAtLeast("OpenCL 1.2 CUDA", 1, 2)).isTrue();
        assertThat(OpenClDeviceProperties.openClVersionAtLeast("OpenCL 1.1 Mesa", 1, 2)).isFalse();
        assertThat(OpenClDeviceProperties.openClVersionAtLeast("OpenCL 3.0 PoCL HSTR: pthread", 2, 0)).isTrue();
        assertThat(OpenClDeviceProperties.openClVersionAtLeast("OpenCL 2.1", 3, 0)).isFalse();
        assertThat(OpenClDeviceProperties.openClVersionAtLeast("unreadable", 1, 0)).isTrue();
        assertThat(OpenClDeviceProperties.openClVersionAtLeast("unreadable", 1, 1)).isFalse();
    }
}
