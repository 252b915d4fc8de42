package dev.compute.boot;

import dev.compute.memory.InvalidSettingException;
import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.UnifiedMemoryManagerBuilder;
import dev.compute.memory.recording.RecordingOptions;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import org.jspecify.annotations.Nullable;
import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.boot.context.properties.bind.DefaultValue;
import org.springframework.util.unit.DataSize;

/**
 * The {@code compute.*} properties. The memory settings are checked where they are used, by
 * {@link UnifiedMemoryManagerBuilder#build()}, so the rules live in one place and a bad value fails start-up
 * with an {@link InvalidSettingException} naming the property; what only the starter uses (the health
 * thresholds) is checked here, when the properties are bound.
 *
 * @param backend Which backend runs the memory: auto takes the best available one (an accelerator
 *     before the CPU); cpu, cuda or opencl insists on that one and fails start-up,
 *     with the reason, when it cannot run here.
 * @param device The device index within the backend, 0 for the first device.
 * @param memory Where buffers go, how they are pooled, pinned and tracked.
 * @param opencl Options for the OpenCL backend.
 * @param health Thresholds of the compute health contributor.
 */
@ConfigurationProperties("compute")
public record ComputeProperties(
        @DefaultValue("auto") String backend,
        @DefaultValue("0") int device,
        @DefaultValue Memory memory,
        @DefaultValue OpenCl opencl,
        @DefaultValue Health health) {

    private static final List<String> OPENCL_DEVICE_TYPES = List.of("gpu", "cpu", "accelerator", "all");

    /** A builder holding every setting, ready for {@link UnifiedMemoryManagerBuilder#build()}. */
    public UnifiedMemoryManagerBuilder toBuilder() {
        UnifiedMemoryManagerBuilder builder = UnifiedMemoryManager.builder()
                .backend(required("compute.backend", backend))
                .device(device)
                .defaultLocation(memory.defaultLocation().location())
                .poolingEnabled(memory.pooling().enabled())
                .maxPoolSize(bytes("compute.memory.pooling.max-pool-size", memory.pooling().maxPoolSize()))
                .trimInterval(required("compute.memory.pooling.trim-interval", memory.pooling().trimInterval()))
                .expandableSegments(memory.pooling().expandableSegments())
                .pinningEnabled(memory.pinning().enabled())
                .maxPinnedSize(bytes("compute.memory.pinning.max-pinned-size", memory.pinning().maxPinnedSize()))
                .leakDetection(required("compute.memory.leak-detection", memory.leakDetection()))
                .timelineCapacity(memory.timeline().capacity())
                .timelineInterval(required("compute.memory.timeline.interval", memory.timeline().interval()))
                .closeTimeout(required("compute.memory.close-timeout", memory.closeTimeout()))
                .deviceWaitTimeout(required("compute.memory.device-wait-timeout", memory.deviceWaitTimeout()))
                .allocationRecording(memory.recording().enabled());
        // unset, these follow max-pool-size and max-pinned-size in the builder
        if (memory.pooling().releaseThreshold() != null) {
            builder.releaseThreshold(memory.pooling().releaseThreshold().toBytes());
        }
        if (memory.pinning().stagingBufferSize() != null) {
            builder.stagingBufferSize(memory.pinning().stagingBufferSize().toBytes());
        }
        if (opencl.platform() != null && !opencl.platform().isBlank()) {
            builder.backendOption("platform", opencl.platform().trim());
        }
        if (opencl.deviceType() != null && !opencl.deviceType().isBlank()) {
            builder.backendOption("device-type", deviceType(opencl.deviceType().trim()));
        }
        return builder;
    }

    // An empty value in YAML binds as null; say which property is empty rather than fail with a NullPointerException.
    private static <T> T required(String property, @Nullable T value) {
        if (value == null) {
            throw new InvalidSettingException(property, "", "a value is required");
        }
        return value;
    }

    // Checked here, not by the OpenCL backend: under auto a backend that is passed over would never see a typo.
    private static String deviceType(String value) {
        if (!OPENCL_DEVICE_TYPES.contains(value.toLowerCase(Locale.ROOT))) {
            throw new InvalidSettingException("compute.opencl.device-type", value, "one of " + String.join(", ", OPENCL_DEVICE_TYPES) + ", or empty");
        }
        return value;
    }

    private static long bytes(String property, @Nullable DataSize size) {
        return required(property, size).toBytes();
    }

    /**
     * @param defaultLocation Where allocate(bytes) puts memory: auto is DEVICE on an accelerator
     *     and HOST on the CPU backend.
     * @param pooling The caching pool.
     * @param pinning Page-locked host memory, the fast path for transfers.
     * @param leakDetection How buffers dropped without close() are found: disabled, simple
     *     (a sample, without allocation sites) or paranoid (every buffer, with its allocation site; costly).
     * @param timeline The history of reserved, allocated and cached bytes that the endpoint returns.
     * @param closeTimeout How long closing the manager (at shutdown) waits, in all, for views and accesses other
     *     threads still hold, calls under way and device work; memory still held then is kept, not freed. 0: no wait.
     * @param deviceWaitTimeout The longest a call waits for device work it depends on (a read after a kernel, an
     *     allocation needing memory that work on a freed buffer still uses) before it fails saying the work may be stuck.
     * @param recording Recording allocations and frees into a trace the replayer reads (the computetrace endpoint).
     */
    public record Memory(
            @DefaultValue("auto") LocationSetting defaultLocation,
            @DefaultValue Pooling pooling,
            @DefaultValue Pinning pinning,
            @DefaultValue("simple") LeakDetectionLevel leakDetection,
            @DefaultValue Timeline timeline,
            @DefaultValue("5s") Duration closeTimeout,
            @DefaultValue("60s") Duration deviceWaitTimeout,
            @DefaultValue Recording recording) {}

    /**
     * @param enabled Whether freed blocks are cached for reuse; off, every allocation is a backend call.
     * @param maxPoolSize Cap on the bytes reserved from the backend per location.
     * @param releaseThreshold Cached bytes a trim keeps for reuse; at most max-pool-size. Unset: 256MB, or
     *     max-pool-size where that is smaller.
     * @param trimInterval How often cached memory beyond the release threshold is given back, at least 1ms; 0
     *     disables scheduled trimming.
     * @param expandableSegments Whether the pool maps pages into reserved address ranges where the backend can,
     *     so reserved memory follows live memory closely.
     */
    public record Pooling(
            @DefaultValue("true") boolean enabled,
            @DefaultValue("4GB") DataSize maxPoolSize,
            @Nullable DataSize releaseThreshold,
            @DefaultValue("5m") Duration trimInterval,
            @DefaultValue("true") boolean expandableSegments) {}

    /**
     * @param enabled Whether PINNED buffers and pinned staging buffers may be used.
     * @param maxPinnedSize Cap on the bytes reserved for PINNED buffers.
     * @param stagingBufferSize Size of one staging buffer for copies between pageable host memory and a device.
     *     Unset: 16MB, or max-pinned-size where that is smaller.
     */
    public record Pinning(
            @DefaultValue("true") boolean enabled,
            @DefaultValue("2GB") DataSize maxPinnedSize,
            @Nullable DataSize stagingBufferSize) {}

    /**
     * @param capacity How many samples each location keeps (at the default interval, an hour); 1 to 86400.
     * @param interval How often reserved, allocated and cached bytes are sampled, at least 1ms; 0 disables sampling.
     */
    public record Timeline(
            @DefaultValue("720") int capacity,
            @DefaultValue("5s") Duration interval) {}

    /**
     * @param enabled Whether allocations and frees can be recorded at all; on, each allocation and free pays one
     *     volatile read while nothing records; off, the manager has no recording adaptor and no recording can start.
     * @param maxEvents The most events a recording started through the computetrace endpoint may keep, and what it
     *     keeps when the request does not say; 1 to 10000000 (an event takes about 40 bytes of heap).
     * @param callSiteFrames How many frames of the allocating code a recording started through the computetrace
     *     endpoint keeps with each allocation when the request does not say; 0 (none) to 64. Taking them walks the stack
     *     on every allocation.
     */
    public record Recording(
            @DefaultValue("true") boolean enabled,
            @DefaultValue("1000000") int maxEvents,
            @DefaultValue("0") int callSiteFrames) {

        public Recording {
            if (maxEvents < 1 || maxEvents > RecordingOptions.MAX_EVENTS) {
                throw new InvalidSettingException("compute.memory.recording.max-events", maxEvents,
                        "a number of events from 1 to " + RecordingOptions.MAX_EVENTS + ", such as 1000000");
            }
            if (callSiteFrames < 0 || callSiteFrames > RecordingOptions.MAX_CALL_SITE_FRAMES) {
                throw new InvalidSettingException("compute.memory.recording.call-site-frames", callSiteFrames,
                        "a number of frames from 0 (none) to " + RecordingOptions.MAX_CALL_SITE_FRAMES + ", such as 8");
            }
        }
    }

    /**
     * @param platform The OpenCL platform to use, by index or by a part of its name (such as NVIDIA or
     *     Portable Computing Language); unset, the first platform with a device of the wanted type.
     * @param deviceType The OpenCL device type to use: gpu, cpu, accelerator or
     *     all; unset, the backend's default.
     */
    public record OpenCl(@Nullable String platform, @Nullable String deviceType) {}

    /**
     * @param fragmentationWarningThreshold Fragmentation (1 − largest free block / cached bytes) of a location above
     *     which the health details carry a warning; between 0 and 1.
     * @param deviceMemoryWarningThreshold Share of the device's memory in use (by anyone) above which the health
     *     details carry a warning; between 0 and 1.
     */
    public record Health(
            @DefaultValue("0.5") double fragmentationWarningThreshold,
            @DefaultValue("0.9") double deviceMemoryWarningThreshold) {

        public Health {
            ratio("compute.health.fragmentation-warning-threshold", fragmentationWarningThreshold);
            ratio("compute.health.device-memory-warning-threshold", deviceMemoryWarningThreshold);
        }

        private static void ratio(String property, double value) {
            if (!(value >= 0.0 && value <= 1.0)) {
                throw new InvalidSettingException(property, value, "a fraction between 0 and 1, such as 0.5 or 0.9");
            }
        }
    }
}
