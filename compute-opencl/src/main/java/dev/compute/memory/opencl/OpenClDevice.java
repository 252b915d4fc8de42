package dev.compute.memory.opencl;

import static org.jocl.CL.CL_DEVICE_TYPE_ACCELERATOR;
import static org.jocl.CL.CL_DEVICE_TYPE_CPU;
import static org.jocl.CL.CL_DEVICE_TYPE_GPU;

import org.jocl.cl_device_id;
import org.jocl.cl_platform_id;

/**
 * One OpenCL device as enumerated: its platform (its index in the ICD loader's order, as {@code clinfo -l} numbers
 * them, its name and its vendor), its ids and the names a user recognises.
 */
record OpenClDevice(cl_platform_id platformId, int platformIndex, String platformName, String platformVendor,
                    cl_device_id deviceId, String deviceName, long type, String version) {

    /**
     * Whether the {@code platform} option names this device's platform: its index (a whole number), or a fragment of
     * its name or its vendor, ignoring case (PoCL's name is "Portable Computing Language", its vendor "The pocl
     * project", so {@code pocl} finds it).
     */
    boolean platformMatches(String option) {
        if (option.isEmpty()) {
            return true;
        }
        if (option.chars().allMatch(Character::isDigit)) {
            return option.length() < 10 && Integer.parseInt(option) == platformIndex;
        }
        String fragment = option.toLowerCase(java.util.Locale.ROOT);
        return platformName.toLowerCase(java.util.Locale.ROOT).contains(fragment)
                || platformVendor.toLowerCase(java.util.Locale.ROOT).contains(fragment);
    }

    /** {@code gpu}, {@code accelerator}, {@code cpu} or {@code other}: the words of the {@code device-type} option. */
    String typeName() {
        if ((type & CL_DEVICE_TYPE_GPU) != 0) {
            return "gpu";
        }
        if ((type & CL_DEVICE_TYPE_ACCELERATOR) != 0) {
            return "accelerator";
        }
        if ((type & CL_DEVICE_TYPE_CPU) != 0) {
            return "cpu";
        }
        return "other";
    }

    /** Devices are numbered GPUs first, then accelerators, then CPUs: index 0 is the likeliest accelerator. */
    int typeRank() {
        return switch (typeName()) {
            case "gpu" -> 0;
            case "accelerator" -> 1;
            case "cpu" -> 2;
            default -> 3;
        };
    }

    String describe() {
        return "'" + deviceName + "' (" + typeName() + ", " + version + ") on platform '" + platformName + "'";
    }
}
