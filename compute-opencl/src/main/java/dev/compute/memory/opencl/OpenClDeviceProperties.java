package dev.compute.memory.opencl;

import static org.jocl.CL.CL_DEVICE_DOUBLE_FP_CONFIG;
import static org.jocl.CL.CL_DEVICE_EXTENSIONS;
import static org.jocl.CL.CL_DEVICE_GLOBAL_MEM_SIZE;
import static org.jocl.CL.CL_DEVICE_MAX_COMPUTE_UNITS;
import static org.jocl.CL.CL_DEVICE_MAX_MEM_ALLOC_SIZE;
import static org.jocl.CL.CL_DEVICE_MEM_BASE_ADDR_ALIGN;
import static org.jocl.CL.CL_DEVICE_SVM_CAPABILITIES;
import static org.jocl.CL.CL_DEVICE_SVM_COARSE_GRAIN_BUFFER;
import static org.jocl.CL.CL_DEVICE_SVM_FINE_GRAIN_BUFFER;

import dev.compute.memory.spi.BackendAvailability;
import java.util.List;
import org.jocl.cl_device_id;

/**
 * What the backend needs to know of its device, read once when it opens, and what follows from it: whether UNIFIED
 * memory exists there, which marker call the queue may use. Apart from the backend so that those rules can be checked
 * against any device's properties, not only the one at hand.
 *
 * @param alignment            {@code CL_DEVICE_MEM_BASE_ADDR_ALIGN} in bytes (at least 1): sub-buffer origins must be
 *                             multiples of it, and allocation sizes are rounded up to it
 * @param maxAllocation        {@code CL_DEVICE_MAX_MEM_ALLOC_SIZE}: the largest single allocation
 * @param globalMemory         {@code CL_DEVICE_GLOBAL_MEM_SIZE}
 * @param svmCapabilities      {@code CL_DEVICE_SVM_CAPABILITIES}; 0 on devices before OpenCL 2.0, which lack the query
 * @param doublePrecision      whether the device has {@code cl_khr_fp64} (or a double floating-point config)
 * @param markersTakeWaitLists whether the device has {@code clEnqueueMarkerWithWaitList} (OpenCL 1.2), not only the
 *                             deprecated {@code clEnqueueMarker}
 */
record OpenClDeviceProperties(OpenClDevice device, long alignment, long maxAllocation, long globalMemory, int computeUnits,
                              long svmCapabilities, boolean doublePrecision, boolean markersTakeWaitLists) {

    /** Reads {@code device}'s properties; the optional ones fall back where its OpenCL version does not know them. */
    static OpenClDeviceProperties read(OpenClDevice device) {
        cl_device_id id = device.deviceId();
        long alignment = Math.max(1, OpenClCalls.deviceLong(id, CL_DEVICE_MEM_BASE_ADDR_ALIGN) / 8);
        long maxAllocation = OpenClCalls.deviceLong(id, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
        long globalMemory = OpenClCalls.deviceLong(id, CL_DEVICE_GLOBAL_MEM_SIZE);
        int computeUnits = (int) OpenClCalls.deviceLong(id, CL_DEVICE_MAX_COMPUTE_UNITS);
        // SVM needs an OpenCL 2.0 device; older ones do not know the query
        long svmCapabilities = openClVersionAtLeast(device.version(), 2, 0) ? OpenClCalls.deviceLongOr(id, CL_DEVICE_SVM_CAPABILITIES, 0) : 0;
        boolean markersTakeWaitLists = openClVersionAtLeast(device.version(), 1, 2);
        boolean doublePrecision = OpenClCalls.deviceLongOr(id, CL_DEVICE_DOUBLE_FP_CONFIG, 0) != 0
                || List.of(OpenClCalls.deviceString(id, CL_DEVICE_EXTENSIONS).split(" ")).contains("cl_khr_fp64");
        return new OpenClDeviceProperties(device, alignment, maxAllocation, globalMemory, computeUnits, svmCapabilities,
                doublePrecision, markersTakeWaitLists);
    }

    /**
     * Whether UNIFIED memory exists on the device: it promises memory the host may touch at any time, which only
     * fine-grained buffer SVM gives; coarse-grained SVM, or none, is a reason that says what to use instead.
     */
    BackendAvailability unifiedSupport() {
        if ((svmCapabilities & CL_DEVICE_SVM_FINE_GRAIN_BUFFER) != 0) {
            return BackendAvailability.available("fine-grained buffer shared virtual memory (clSVMAlloc)");
        }
        if ((svmCapabilities & CL_DEVICE_SVM_COARSE_GRAIN_BUFFER) != 0) {
            return BackendAvailability.unavailable("UNIFIED memory needs fine-grained shared virtual memory, and OpenCL device "
                    + device.describe() + " has only coarse-grained SVM, which the host may touch only between map and unmap "
                    + "calls; use DEVICE (synced by the manager) or PINNED memory instead");
        }
        return BackendAvailability.unavailable("UNIFIED memory needs shared virtual memory (OpenCL 2.0 SVM), and OpenCL device "
                + device.describe() + " has none; use DEVICE (synced by the manager) or PINNED memory instead");
    }

    /** Whether a device version ("OpenCL &lt;major&gt;.&lt;minor&gt; &lt;vendor-specific&gt;") is at least the one given; 1.0 when unreadable. */
    static boolean openClVersionAtLeast(String version, int major, int minor) {
        int[] found = {1, 0};
        String[] words = version.split(" ");
        if (words.length >= 2) {
            try {
                String[] numbers = words[1].split("\\.");
                found = new int[] {Integer.parseInt(numbers[0]), Integer.parseInt(numbers[1])};
            } catch (RuntimeException unreadable) {
                // keep 1.0: every device has what 1.0 has
            }
        }
        return found[0] != major ? found[0] > major : found[1] >= minor;
    }
}
