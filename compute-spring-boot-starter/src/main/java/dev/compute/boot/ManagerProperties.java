package dev.compute.boot;

import dev.compute.memory.InvalidSettingException;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.UnifiedMemoryManagerBuilder;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.jspecify.annotations.Nullable;
import org.springframework.boot.context.properties.bind.DefaultValue;
import org.springframework.util.unit.DataSize;

/**
 * The settings of one manager: {@code compute.*} for the one manager the starter builds by default, or, for each
 * name under {@code compute.managers}, {@code compute.managers.<name>.*} with every value it does not set taken
 * from {@code compute.*} (a map such as {@code backend-options} key by key). The keys are those of
 * {@link ComputeProperties} less {@code health} and {@code primary}, which are the application's, not a manager's.
 * The defaults are those of {@link ComputeProperties}. Property names in the exceptions are those of
 * {@code compute.*}; the starter renames them to where a named manager's value was set.
 *
 * @param backend auto, cpu, cuda, opencl or another provider's name
 * @param device the device index within the backend
 * @param memory where buffers go, how they are pooled, pinned and tracked
 * @param opencl the OpenCL backend's platform and device type, the same as the backend options of those names
 * @param backendOptions options passed to the backend as they are ({@link BackendOptions} lists the known ones)
 */
public record ManagerProperties(
        @DefaultValue("auto") String backend,
        @DefaultValue("0") int device,
        @DefaultValue ComputeProperties.Memory memory,
        @DefaultValue ComputeProperties.OpenCl opencl,
        @DefaultValue Map<String, String> backendOptions) {

    private static final List<String> OPENCL_DEVICE_TYPES = List.of("gpu", "cpu", "accelerator", "all");

    public ManagerProperties {
        backendOptions = new LinkedHashMap<>(backendOptions);
    }

    /** A builder holding every setting, ready for {@link UnifiedMemoryManagerBuilder#build()}. */
    public UnifiedMemoryManagerBuilder toBuilder() {
        ComputeProperties.Pooling pooling = memory.pooling();
        ComputeProperties.Pinning pinning = memory.pinning();
        UnifiedMemoryManagerBuilder builder = UnifiedMemoryManager.builder()
                .backend(required("compute.backend", backend))
                .device(device)
                .defaultLocation(memory.defaultLocation().location())
                .poolingEnabled(pooling.enabled())
                .maxPoolSize(required("compute.memory.pooling.max-pool-size", pooling.maxPoolSize()))
                .trimInterval(required("compute.memory.pooling.trim-interval", pooling.trimInterval()))
                .compactionInterval(required("compute.memory.pooling.compaction-interval", pooling.compactionInterval()))
                .compactOnOutOfMemory(pooling.compactOnOutOfMemory())
                .expandableSegments(pooling.expandableSegments())
                .pinningEnabled(pinning.enabled())
                .maxPinnedSize(bytes("compute.memory.pinning.max-pinned-size", pinning.maxPinnedSize()))
                .leakDetection(required("compute.memory.leak-detection", memory.leakDetection()))
                .timelineCapacity(memory.timeline().capacity())
                .timelineInterval(required("compute.memory.timeline.interval", memory.timeline().interval()))
                .closeTimeout(required("compute.memory.close-timeout", memory.closeTimeout()))
                .deviceWaitTimeout(required("compute.memory.device-wait-timeout", memory.deviceWaitTimeout()))
                .heldMemoryWarning(required("compute.memory.held-memory-warning", memory.heldMemoryWarning()))
                .outOfMemoryRetries(memory.outOfMemoryRetries())
                .maxOpenMappedFiles(memory.mappedFiles().maxOpen())
                .allocationRecording(memory.recording().enabled());
        // unset, these follow max-pool-size and max-pinned-size in the builder
        if (pooling.releaseThreshold() != null) {
            builder.releaseThreshold(pooling.releaseThreshold().toBytes());
        }
        if (pinning.stagingBufferSize() != null) {
            builder.stagingBufferSize(pinning.stagingBufferSize().toBytes());
        }
        if (pooling.warmup() != null) {
            pooling.warmup().forEach((key, entries) -> {
                MemoryLocation location = warmupLocation(key);
                for (int i = 0; i < entries.size(); i++) {
                    builder.warmup(location, bytes("compute.memory.pooling.warmup." + key + "[" + i + "].size", entries.get(i).size()),
                            entries.get(i).count());
                }
            });
        }
        options().forEach(builder::backendOption);
        return builder;
    }

    // Keys are read here rather than bound as enums, so that a wrong one gets the same report as every other bad value.
    private static MemoryLocation warmupLocation(String key) {
        // in ASCII's case only: equalsIgnoreCase folds hoſt (a long s) to host and pınned (a dotless i) to pinned
        String lowerCase = key.strip().toLowerCase(Locale.ROOT);
        for (MemoryLocation location : MemoryLocation.values()) {
            if (location.name().toLowerCase(Locale.ROOT).equals(lowerCase)) {
                return location;
            }
        }
        throw new InvalidSettingException("compute.memory.pooling.warmup." + key, key, "a location: device, host, pinned or unified");
    }

    /**
     * The backend options, {@code compute.opencl.*} among them under the OpenCL backend's keys, checked whatever the
     * backend and passed on where it may read them: under auto, or a backend that reads them or does not say what it
     * reads. Under another named backend (cpu in a test profile beside production's OpenCL settings) they are not its
     * options, and would stop start-up as one it does not read.
     */
    public Map<String, String> options() {
        Map<String, String> options = new LinkedHashMap<>(backendOptions);
        openCl(options, BackendOptions.OPENCL_PLATFORM, "compute.opencl.platform", opencl.platform());
        openCl(options, BackendOptions.OPENCL_DEVICE_TYPE, "compute.opencl.device-type", opencl.deviceType());
        String deviceType = options.get(BackendOptions.OPENCL_DEVICE_TYPE);
        // Checked here, not by the OpenCL backend: under auto a backend that is passed over would never see a typo.
        if (deviceType != null && !OPENCL_DEVICE_TYPES.contains(deviceType.toLowerCase(Locale.ROOT))) {
            String property = opencl.deviceType() != null && !opencl.deviceType().isBlank()
                    ? "compute.opencl.device-type" : BackendOptions.property(BackendOptions.OPENCL_DEVICE_TYPE);
            throw new InvalidSettingException(property, deviceType, "one of " + String.join(", ", OPENCL_DEVICE_TYPES) + ", or empty");
        }
        if (!BackendOptions.readsOpenClOptions(backend)) {
            for (String key : List.of(BackendOptions.OPENCL_PLATFORM, BackendOptions.OPENCL_DEVICE_TYPE)) {
                if (!backendOptions.containsKey(key)) {
                    options.remove(key); // set only through compute.opencl.*
                }
            }
        }
        return options;
    }

    // compute.opencl.platform is compute.backend-options.platform by another name: both set, they must agree
    private static void openCl(Map<String, String> options, String key, String property, @Nullable String value) {
        if (value == null || value.isBlank()) {
            return;
        }
        String trimmed = value.trim();
        String other = options.putIfAbsent(key, trimmed);
        if (other != null && !other.equals(trimmed)) {
            throw new InvalidSettingException(property, trimmed, "the value of " + BackendOptions.property(key) + " ('" + other
                    + "'), which sets the same backend option, or unset");
        }
    }

    // An empty value in YAML binds as null; say which property is empty rather than fail with a NullPointerException.
    private static <T> T required(String property, @Nullable T value) {
        if (value == null) {
            throw new InvalidSettingException(property, "", "a value is required");
        }
        return value;
    }

    private static long bytes(String property, @Nullable DataSize size) {
        return required(property, size).toBytes();
    }
}
