package dev.compute.memory.opencl;

import static org.jocl.CL.CL_DEVICE_NAME;
import static org.jocl.CL.CL_DEVICE_NOT_FOUND;
import static org.jocl.CL.CL_DEVICE_TYPE;
import static org.jocl.CL.CL_DEVICE_TYPE_ALL;
import static org.jocl.CL.CL_DEVICE_VERSION;
import static org.jocl.CL.CL_PLATFORM_NAME;
import static org.jocl.CL.CL_PLATFORM_VENDOR;

import dev.compute.memory.spi.BackendSettings;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.function.Supplier;
import java.util.stream.Collectors;
import org.jocl.CL;
import org.jocl.cl_device_id;
import org.jocl.cl_platform_id;
import org.jspecify.annotations.Nullable;

/**
 * Enumerates OpenCL platforms and devices and picks the configured one: the platform the {@code platform} option
 * names (its index in the ICD loader's order, or a fragment of its name or vendor, ignoring case), devices of the {@code device-type} option on them, numbered GPUs
 * first, then accelerators, then CPUs (in platform and device order within a type), and the device index
 * among those. Every way of finding nothing comes back as a reason naming what was found instead.
 */
final class OpenClDevices {
    private OpenClDevices() {}

    /** {@code -1001}: the ICD loader found no platform (no vendor file under {@code /etc/OpenCL/vendors}). */
    private static final int CL_PLATFORM_NOT_FOUND_KHR = -1001;

    /** The device chosen, or why none could be: exactly one of the two is set. */
    record Choice(@Nullable OpenClDevice device, String detail) {}

    static Choice choose(BackendSettings settings) {
        return choose(settings, OpenClDevices::enumerate);
    }

    /**
     * As {@link #choose(BackendSettings)}, over the devices {@code enumerator} finds. Without an ICD loader
     * JOCL's class fails to initialise with an {@link UnsatisfiedLinkError} (a {@link NoClassDefFoundError} on
     * every later try): both are a reason, not a failure.
     */
    static Choice choose(BackendSettings settings, Supplier<List<OpenClDevice>> enumerator) {
        String typeOption = option(settings, OpenClBackendProvider.DEVICE_TYPE_OPTION);
        String platformOption = option(settings, OpenClBackendProvider.PLATFORM_OPTION);
        long type;
        try {
            type = parseDeviceType(typeOption);
        } catch (IllegalArgumentException e) {
            return new Choice(null, e.getMessage());
        }
        List<OpenClDevice> all;
        try {
            all = enumerator.get();
        } catch (LinkageError e) {
            return new Choice(null, "the OpenCL ICD loader could not be loaded (" + e.getMessage() + "); install one and a "
                    + "platform: on Debian or Ubuntu 'apt-get install ocl-icd-libopencl1 pocl-opencl-icd', or a GPU vendor's driver");
        }
        if (all.isEmpty()) {
            return new Choice(null, "no OpenCL platform is installed (the ICD loader found none under /etc/OpenCL/vendors); "
                    + "install one: PoCL for the CPU ('apt-get install pocl-opencl-icd') or a GPU vendor's driver");
        }
        List<String> platforms = all.stream().map(d -> d.platformName() + " (index " + d.platformIndex() + ", vendor " + d.platformVendor() + ")")
                .distinct().toList();
        List<OpenClDevice> onPlatform = all.stream().filter(d -> d.platformMatches(platformOption)).toList();
        if (onPlatform.isEmpty()) {
            boolean index = platformOption.chars().allMatch(Character::isDigit);
            return new Choice(null, (index ? "no OpenCL platform with devices has index " + platformOption
                    : "no OpenCL platform's name or vendor contains '" + platformOption + "'") + " ("
                    + OpenClBackendProvider.PLATFORM_OPTION + " option); platforms found: " + platforms);
        }
        List<OpenClDevice> matching = onPlatform.stream()
                .filter(d -> type == CL_DEVICE_TYPE_ALL || (d.type() & type) != 0)
                .sorted(Comparator.comparingInt(OpenClDevice::typeRank))
                .toList();
        if (matching.isEmpty()) {
            return new Choice(null, "no OpenCL device of type '" + typeOption + "' (" + OpenClBackendProvider.DEVICE_TYPE_OPTION
                    + " option) on " + describePlatforms(platformOption) + "; devices found: " + list(onPlatform));
        }
        int index = settings.deviceIndex();
        if (index >= matching.size()) {
            return new Choice(null, "device index " + index + " is out of range: " + matching.size() + " OpenCL device(s) match "
                    + "(type '" + (typeOption.isEmpty() ? "all" : typeOption) + "' on " + describePlatforms(platformOption) + "): " + list(matching));
        }
        OpenClDevice device = matching.get(index);
        return new Choice(device, "OpenCL device " + index + " of " + matching.size() + " matching: " + device.describe());
    }

    /** Every device of every platform, in the ICD loader's platform order. */
    static List<OpenClDevice> enumerate() {
        int[] count = new int[1];
        int code = JoclCalls.clGetPlatformIDs(0, null, count);
        if (code == CL_PLATFORM_NOT_FOUND_KHR || count[0] == 0) {
            return List.of();
        }
        OpenClCalls.check(code, "clGetPlatformIDs");
        cl_platform_id[] platformIds = new cl_platform_id[count[0]];
        OpenClCalls.check(JoclCalls.clGetPlatformIDs(platformIds.length, platformIds, null), "clGetPlatformIDs");
        List<OpenClDevice> devices = new ArrayList<>();
        for (int index = 0; index < platformIds.length; index++) {
            cl_platform_id platform = platformIds[index];
            String platformName = OpenClCalls.platformString(platform, CL_PLATFORM_NAME);
            String platformVendor = OpenClCalls.platformString(platform, CL_PLATFORM_VENDOR);
            int[] deviceCount = new int[1];
            int found = JoclCalls.clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, null, deviceCount);
            if (found == CL_DEVICE_NOT_FOUND || deviceCount[0] == 0) {
                continue;
            }
            OpenClCalls.check(found, "clGetDeviceIDs");
            cl_device_id[] deviceIds = new cl_device_id[deviceCount[0]];
            OpenClCalls.check(JoclCalls.clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, deviceIds.length, deviceIds, null), "clGetDeviceIDs");
            for (cl_device_id device : deviceIds) {
                devices.add(new OpenClDevice(platform, index, platformName, platformVendor, device, OpenClCalls.deviceString(device, CL_DEVICE_NAME),
                        OpenClCalls.deviceLong(device, CL_DEVICE_TYPE), OpenClCalls.deviceString(device, CL_DEVICE_VERSION)));
            }
        }
        return devices;
    }

    /** {@code gpu}, {@code cpu}, {@code accelerator} or {@code all} (also when blank or absent), as a device-type bitfield. */
    static long parseDeviceType(String value) {
        return switch (value.toLowerCase(Locale.ROOT)) {
            case "", "all" -> CL_DEVICE_TYPE_ALL;
            case "gpu" -> CL.CL_DEVICE_TYPE_GPU;
            case "cpu" -> CL.CL_DEVICE_TYPE_CPU;
            case "accelerator" -> CL.CL_DEVICE_TYPE_ACCELERATOR;
            default -> throw new IllegalArgumentException("the " + OpenClBackendProvider.DEVICE_TYPE_OPTION + " option is '" + value
                    + "'; it must be one of gpu, cpu, accelerator, all");
        };
    }

    private static String option(BackendSettings settings, String key) {
        String value = settings.option(key);
        return value == null ? "" : value.trim();
    }

    private static String describePlatforms(String fragment) {
        return fragment.isEmpty() ? "any platform" : "platform(s) matching '" + fragment + "'";
    }

    private static String list(List<OpenClDevice> devices) {
        return devices.stream().map(OpenClDevice::describe).collect(Collectors.joining("; ", "[", "]"));
    }
}
