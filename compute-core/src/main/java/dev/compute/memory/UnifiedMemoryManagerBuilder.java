package dev.compute.memory;

import dev.compute.memory.manager.ChainBuilder;
import dev.compute.memory.manager.ManagerExtensions;
import dev.compute.memory.manager.PoolWarmup;
import dev.compute.memory.resource.PoolSettings;
import dev.compute.memory.resource.ResourceAdaptor;
import dev.compute.memory.spi.BackendSettings;
import dev.compute.memory.spi.ComputeBackend;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import org.jspecify.annotations.Nullable;

/**
 * Every setting of {@code compute.*} in {@code application.yml}, with the same defaults. {@link #build()}
 * checks them all and fails with an {@link InvalidSettingException} that names the property. A default never
 * contradicts a setting the user gave: where it would, it follows that setting (an unset release threshold is
 * at most max-pool-size and at least the largest warm-up that fits, an unset staging buffer at most max-pinned-size);
 * values the user set are checked as given. Where a value depends on the device (a cap given as a share of its
 * memory), the rules that need it are checked when the manager has opened the backend, with the same exception.
 */
public final class UnifiedMemoryManagerBuilder {

    public static final long DEFAULT_MAX_POOL_SIZE = 4L << 30;
    public static final long DEFAULT_RELEASE_THRESHOLD = 256L << 20;
    public static final Duration DEFAULT_TRIM_INTERVAL = Duration.ofMinutes(5);
    public static final long DEFAULT_MAX_PINNED_SIZE = 2L << 30;
    public static final long DEFAULT_STAGING_BUFFER_SIZE = 16L << 20;
    public static final int DEFAULT_TIMELINE_CAPACITY = 720;
    public static final Duration DEFAULT_TIMELINE_INTERVAL = Duration.ofSeconds(5);
    public static final Duration DEFAULT_CLOSE_TIMEOUT = Duration.ofSeconds(5);
    public static final Duration DEFAULT_HELD_MEMORY_WARNING = Duration.ofSeconds(1);
    /** The most timeline samples a location may keep (a day at one a second). */
    public static final int MAX_TIMELINE_CAPACITY = 86_400;
    public static final int DEFAULT_OUT_OF_MEMORY_RETRIES = 3;
    /** More retries than this would only hide a handler that frees nothing. */
    public static final int MAX_OUT_OF_MEMORY_RETRIES = 100;
    /** A sixteenth of the memory-map entries Linux allows a process by default ({@code vm.max_map_count}, 65530). */
    public static final int DEFAULT_MAX_OPEN_MAPPED_FILES = 4096;

    /**
     * The longest a timeout or interval may be: waits are counted in nanoseconds from {@link System#nanoTime()}, and a
     * longer one (a "wait forever" such as {@code Duration.ofSeconds(Long.MAX_VALUE)}) would overflow where it is used.
     */
    public static final Duration MAX_DURATION = Duration.ofDays(365);

    private static final String MAX_POOL_SIZE = "compute.memory.pooling.max-pool-size";

    private String name = "default";
    private String backend = "auto";
    private @Nullable ComputeBackend backendInstance;
    private int device;
    private final Map<String, String> backendOptions = new LinkedHashMap<>();
    private @Nullable MemoryLocation defaultLocation;
    private boolean poolingEnabled = true;
    private PoolSize maxPoolSize = PoolSize.ofBytes(DEFAULT_MAX_POOL_SIZE);
    /** Null while unset; {@link #releaseThresholdUnder(long)} then follows the cap and the warm-up. */
    private @Nullable Long releaseThreshold;
    private final Map<MemoryLocation, List<WarmupBlocks>> warmup = new EnumMap<>(MemoryLocation.class);
    private Duration trimInterval = DEFAULT_TRIM_INTERVAL;
    private Duration compactionInterval = Duration.ZERO;
    private boolean compactOnOutOfMemory = true;
    private boolean expandableSegments = true;
    private boolean pinningEnabled = true;
    private long maxPinnedSize = DEFAULT_MAX_PINNED_SIZE;
    /** Null while unset; {@link #stagingBufferSize()} then follows max-pinned-size. */
    private @Nullable Long stagingBufferSize;
    private LeakDetectionLevel leakDetection = LeakDetectionLevel.SIMPLE;
    private int timelineCapacity = DEFAULT_TIMELINE_CAPACITY;
    private Duration timelineInterval = DEFAULT_TIMELINE_INTERVAL;
    private Duration closeTimeout = DEFAULT_CLOSE_TIMEOUT;
    private Duration deviceWaitTimeout = PoolSettings.DEFAULT_DEVICE_WAIT_TIMEOUT;
    private Duration heldMemoryWarning = DEFAULT_HELD_MEMORY_WARNING;
    private final List<MemoryEventListener> eventListeners = new ArrayList<>();
    private final List<OutOfMemoryHandler> outOfMemoryHandlers = new ArrayList<>();
    private int outOfMemoryRetries = DEFAULT_OUT_OF_MEMORY_RETRIES;
    private final List<ResourceAdaptor> resourceAdaptors = new ArrayList<>();
    private boolean allocationRecording = true;
    private int maxOpenMappedFiles = DEFAULT_MAX_OPEN_MAPPED_FILES;

    UnifiedMemoryManagerBuilder() {}

    /** {@code compute.backend}: {@code auto} (default), or a provider's name: {@code cpu}, {@code cuda}, {@code opencl}. */
    public UnifiedMemoryManagerBuilder backend(String name) {
        this.backend = name;
        return this;
    }

    /**
     * Runs on a backend the caller opened (a test double, a backend set up by hand). The manager closes it. Such a
     * backend keeps the {@link dev.compute.memory.spi.BackendSettings} it was opened with: its device, pinning, staging
     * buffers and options, and the bound of its own calls' waits for device work; this builder's
     * {@link #deviceWaitTimeout} bounds the manager's own waits only, so open the backend with the same wait.
     */
    public UnifiedMemoryManagerBuilder backend(ComputeBackend backend) {
        this.backendInstance = backend;
        return this;
    }

    /**
     * What the log calls this manager (its start, its shutdown report, its warnings): {@code default} unless given, so
     * that the reports of several managers in one process tell them apart.
     */
    public UnifiedMemoryManagerBuilder name(String name) {
        this.name = name;
        return this;
    }

    /** {@code compute.device}: the device index within the backend. */
    public UnifiedMemoryManagerBuilder device(int index) {
        this.device = index;
        return this;
    }

    /** A backend-specific option (for OpenCL {@code platform}, {@code device-type}). */
    public UnifiedMemoryManagerBuilder backendOption(String key, String value) {
        Objects.requireNonNull(key, "a backend option needs a name");
        backendOptions.put(key, Objects.requireNonNull(value, () -> "backend option '" + key + "' needs a value"));
        return this;
    }

    /** {@code compute.memory.default-location}; {@code null} for auto: DEVICE on an accelerator, HOST on the CPU. */
    public UnifiedMemoryManagerBuilder defaultLocation(@Nullable MemoryLocation location) {
        this.defaultLocation = location;
        return this;
    }

    public UnifiedMemoryManagerBuilder poolingEnabled(boolean enabled) {
        this.poolingEnabled = enabled;
        return this;
    }

    /** {@code compute.memory.pooling.max-pool-size}: cap on reserved bytes per location (PINNED has its own). */
    public UnifiedMemoryManagerBuilder maxPoolSize(long bytes) {
        this.maxPoolSize = PoolSize.ofBytes(bytes);
        return this;
    }

    /**
     * {@code compute.memory.pooling.max-pool-size} in bytes or as a share of the device's total memory
     * ({@code PoolSize.ofShare(0.8)}, {@code 80%} in YAML), resolved when the manager starts.
     */
    public UnifiedMemoryManagerBuilder maxPoolSize(PoolSize size) {
        this.maxPoolSize = size;
        return this;
    }

    /**
     * {@code compute.memory.pooling.release-threshold}: cached bytes a trim keeps, at most max-pool-size. Unset:
     * {@value #DEFAULT_RELEASE_THRESHOLD} bytes or the largest location's warm-up where that is more, but at most
     * max-pool-size.
     */
    public UnifiedMemoryManagerBuilder releaseThreshold(long bytes) {
        this.releaseThreshold = bytes;
        return this;
    }

    /**
     * Adds to {@code compute.memory.pooling.warmup.<location>}: {@code count} blocks of {@code blockBytes} bytes,
     * reserved when the manager starts and freed at once, so that they stay cached and the first requests of that size
     * make no backend call. The manager then trims to the release threshold, as a scheduled trim would, and fails to
     * start if less than the warm-up is left: a location's warm-up must fit under the release threshold and its cap.
     */
    public UnifiedMemoryManagerBuilder warmup(MemoryLocation location, long blockBytes, int count) {
        warmup.computeIfAbsent(Objects.requireNonNull(location, "location"), l -> new ArrayList<>()).add(new WarmupBlocks(blockBytes, count));
        return this;
    }

    /**
     * {@code compute.memory.pooling.compaction-interval}: how often the maintenance thread compacts every location
     * ({@link UnifiedMemoryManager#compact()}); zero, the default, compacts only when asked.
     */
    public UnifiedMemoryManagerBuilder compactionInterval(Duration interval) {
        this.compactionInterval = interval;
        return this;
    }

    /**
     * {@code compute.memory.pooling.compact-on-out-of-memory}: whether an allocation that finds no memory, once the pool
     * has given back what it caches, compacts its location ({@link UnifiedMemoryManager#compact(MemoryLocation)}) and
     * tries once more before the {@linkplain #outOfMemoryHandler application's handlers} are asked. True by default.
     */
    public UnifiedMemoryManagerBuilder compactOnOutOfMemory(boolean compact) {
        this.compactOnOutOfMemory = compact;
        return this;
    }

    /** {@code compute.memory.pooling.trim-interval}; zero disables scheduled trimming. */
    public UnifiedMemoryManagerBuilder trimInterval(Duration interval) {
        this.trimInterval = interval;
        return this;
    }

    public UnifiedMemoryManagerBuilder expandableSegments(boolean enabled) {
        this.expandableSegments = enabled;
        return this;
    }

    public UnifiedMemoryManagerBuilder pinningEnabled(boolean enabled) {
        this.pinningEnabled = enabled;
        return this;
    }

    /** {@code compute.memory.pinning.max-pinned-size}: cap on reserved PINNED bytes. */
    public UnifiedMemoryManagerBuilder maxPinnedSize(long bytes) {
        this.maxPinnedSize = bytes;
        return this;
    }

    /**
     * {@code compute.memory.pinning.staging-buffer-size}: one staging buffer for copies from pageable memory, at most
     * max-pinned-size where pinning is on. Unset: {@value #DEFAULT_STAGING_BUFFER_SIZE} bytes, or max-pinned-size where
     * that is smaller.
     */
    public UnifiedMemoryManagerBuilder stagingBufferSize(long bytes) {
        this.stagingBufferSize = bytes;
        return this;
    }

    public UnifiedMemoryManagerBuilder leakDetection(LeakDetectionLevel level) {
        this.leakDetection = level;
        return this;
    }

    /** How many timeline samples each location keeps (the memory map's history). */
    public UnifiedMemoryManagerBuilder timelineCapacity(int samples) {
        this.timelineCapacity = samples;
        return this;
    }

    /** How often the timeline is sampled; zero disables sampling. */
    public UnifiedMemoryManagerBuilder timelineInterval(Duration interval) {
        this.timelineInterval = interval;
        return this;
    }

    /**
     * {@code compute.memory.close-timeout}: how long {@link UnifiedMemoryManager#close()} waits, in all, for views
     * and accesses other threads hold, calls under way and device work, before it keeps (rather than frees) the
     * memory they may still use. Zero: no wait. On an idle device the backend's close then waits what is left of it, 1 s
     * at least, for the application's actions on device futures still running, before it keeps its context.
     */
    public UnifiedMemoryManagerBuilder closeTimeout(Duration timeout) {
        this.closeTimeout = timeout;
        return this;
    }

    /**
     * {@code compute.memory.device-wait-timeout}: the longest a call waits for device work it depends on (a read
     * after a kernel, an allocation that needs memory still used by work on a freed buffer) before it fails with
     * {@link DeviceTimeoutException} or {@link DeviceOutOfMemoryException} saying the work may be stuck. 60 s.
     */
    public UnifiedMemoryManagerBuilder deviceWaitTimeout(Duration timeout) {
        this.deviceWaitTimeout = timeout;
        return this;
    }

    /**
     * {@code compute.memory.held-memory-warning}: how long a closed buffer's memory may wait for views or accesses
     * that still hold it before the log names the threads that hold them (a thread that took a view outside a view
     * scope and went idle), and memory only such views hold gives its pages back to the operating system, the range
     * staying out of the pool until their thread calls in; zero turns both off. Default one second.
     */
    public UnifiedMemoryManagerBuilder heldMemoryWarning(Duration warning) {
        this.heldMemoryWarning = warning;
        return this;
    }

    /** Adds a listener to what happens off the pool's fast path (backend calls, failures, trims, leaks). */
    public UnifiedMemoryManagerBuilder eventListener(MemoryEventListener listener) {
        eventListeners.add(Objects.requireNonNull(listener, "listener"));
        return this;
    }

    /** Adds a handler asked to free memory when an allocation finds none; handlers are asked in the order added. */
    public UnifiedMemoryManagerBuilder outOfMemoryHandler(OutOfMemoryHandler handler) {
        outOfMemoryHandlers.add(Objects.requireNonNull(handler, "handler"));
        return this;
    }

    /**
     * {@code compute.memory.out-of-memory-retries}: how many times one allocation is retried after handlers free
     * memory; 0 turns the handlers off. {@value #DEFAULT_OUT_OF_MEMORY_RETRIES} by default.
     */
    public UnifiedMemoryManagerBuilder outOfMemoryRetries(int retries) {
        this.outOfMemoryRetries = retries;
        return this;
    }

    /**
     * Wraps each location's pool in an adaptor of the application's (a {@link dev.compute.memory.resource.LimitingResource},
     * a tracing one); adaptors added later wrap those added earlier. The manager's statistics and out-of-memory
     * handlers stay above them.
     */
    public UnifiedMemoryManagerBuilder resourceAdaptor(ResourceAdaptor adaptor) {
        resourceAdaptors.add(Objects.requireNonNull(adaptor, "adaptor"));
        return this;
    }

    /**
     * {@code compute.memory.recording.enabled}: whether {@link UnifiedMemoryManager#startRecording} can record
     * allocations and frees (on by default). On, a recording adaptor tops each location's chain, and while nothing
     * records an allocation or free pays one volatile read for it; off, the chains have no such adaptor and
     * recording cannot start.
     */
    public UnifiedMemoryManagerBuilder allocationRecording(boolean enabled) {
        this.allocationRecording = enabled;
        return this;
    }

    /**
     * {@code compute.memory.mapped-files.max-open}: the most files (or ranges of files) mapped at once by
     * {@link UnifiedMemoryManager#mapFile}; 0 turns mapping off. {@value #DEFAULT_MAX_OPEN_MAPPED_FILES} by default.
     * Each mapping is an entry in the process's memory map, whose size the system limits ({@code vm.max_map_count}
     * on Linux) for the whole JVM; the bytes mapped are not limited, since they hold no memory of their own.
     */
    public UnifiedMemoryManagerBuilder maxOpenMappedFiles(int files) {
        this.maxOpenMappedFiles = files;
        return this;
    }

    /**
     * Checks every setting, opens the backend, checks what depends on its device (a cap given as a share of its memory)
     * and builds the manager on the settings so resolved. The backend is closed again if that fails.
     */
    public UnifiedMemoryManager build() {
        validate();
        ComputeBackend opened = ChainBuilder.openBackend(backend, backendInstance,
                new BackendSettings(device, pinningEnabled, stagingBufferSize(), backendOptions, deviceWaitTimeout));
        ManagerSettings settings;
        try {
            String backendName = opened.info().backend();
            long cap = maxPoolSizeOn(opened.memoryInfo(), backendName);
            settings = resolved(backendName, defaultLocation != null ? defaultLocation : opened.defaultLocation(), cap);
        } catch (RuntimeException e) {
            opened.close();
            throw e;
        }
        return new PooledMemoryManager(opened, settings, new ManagerExtensions(eventListeners, outOfMemoryHandlers, resourceAdaptors));
    }

    void validate() {
        requireNonNull("name", name);
        if (name.isBlank()) {
            throw new InvalidSettingException("name", name, "a name the log can call the manager by, such as default or gpu");
        }
        requireNonNull("compute.backend", backend);
        if (backend.isBlank()) {
            throw new InvalidSettingException("compute.backend", backend, "name a backend (auto, cpu, cuda, opencl)");
        }
        if (device < 0) {
            throw new InvalidSettingException("compute.device", device, "a device index of 0 or more");
        }
        requireNonNull(MAX_POOL_SIZE, maxPoolSize);
        if (releaseThreshold != null) {
            notNegative("compute.memory.pooling.release-threshold", releaseThreshold);
        }
        PoolWarmup.validate(warmup, poolingEnabled, pinningEnabled);
        switch (maxPoolSize) {
            case PoolSize.Bytes(long bytes) -> {
                positive(MAX_POOL_SIZE, bytes);
                checkAgainstCap(bytes);
            }
            case PoolSize.Share(double share) -> {
                if (!(share > 0 && share <= 1)) {
                    throw new InvalidSettingException(MAX_POOL_SIZE, maxPoolSize, "a share of the device's memory above 0% and at most 100%, such as 80%, or a size, such as 4GB");
                }
            }
        }
        interval("compute.memory.pooling.trim-interval", trimInterval);
        interval("compute.memory.pooling.compaction-interval", compactionInterval);
        positive("compute.memory.pinning.max-pinned-size", maxPinnedSize);
        if (pinningEnabled) {
            atLeastOnePoolSegment("compute.memory.pinning.max-pinned-size", maxPinnedSize);
        }
        if (stagingBufferSize != null) {
            positive("compute.memory.pinning.staging-buffer-size", stagingBufferSize);
            // each lane pins several of them beside the pool: one above the whole pinned cap is a mistake
            if (pinningEnabled && stagingBufferSize > maxPinnedSize) {
                throw new InvalidSettingException("compute.memory.pinning.staging-buffer-size", stagingBufferSize + " bytes",
                        "at most compute.memory.pinning.max-pinned-size (" + maxPinnedSize + " bytes)");
            }
        }
        requireNonNull("compute.memory.leak-detection", leakDetection);
        // The ring is allocated whole at start and the endpoint returns all of it: a huge capacity fails late and badly.
        if (timelineCapacity <= 0 || timelineCapacity > MAX_TIMELINE_CAPACITY) {
            throw new InvalidSettingException("compute.memory.timeline.capacity", timelineCapacity,
                    "a number of samples from 1 to " + MAX_TIMELINE_CAPACITY + ", such as 720");
        }
        interval("compute.memory.timeline.interval", timelineInterval);
        requireNonNull("compute.memory.close-timeout", closeTimeout);
        if (closeTimeout.isNegative() || closeTimeout.compareTo(MAX_DURATION) > 0) {
            throw new InvalidSettingException("compute.memory.close-timeout", closeTimeout,
                    "0 (no wait) or a positive duration of at most 365d, such as 5s");
        }
        if (outOfMemoryRetries < 0 || outOfMemoryRetries > MAX_OUT_OF_MEMORY_RETRIES) {
            throw new InvalidSettingException("compute.memory.out-of-memory-retries", outOfMemoryRetries,
                    "a number of retries from 0 (handlers off) to " + MAX_OUT_OF_MEMORY_RETRIES + ", such as 3");
        }
        if (maxOpenMappedFiles < 0) {
            throw new InvalidSettingException("compute.memory.mapped-files.max-open", maxOpenMappedFiles,
                    "a number of files from 0 (mapping off) up, such as " + DEFAULT_MAX_OPEN_MAPPED_FILES);
        }
        interval("compute.memory.held-memory-warning", heldMemoryWarning);
        requireNonNull("compute.memory.device-wait-timeout", deviceWaitTimeout);
        if (deviceWaitTimeout.isNegative() || deviceWaitTimeout.compareTo(MAX_DURATION) > 0 || deviceWaitTimeout.toMillis() == 0) {
            throw new InvalidSettingException("compute.memory.device-wait-timeout", deviceWaitTimeout,
                    "a duration of at least 1ms and at most 365d, such as 60s: a call must be able to wait for device work at all, and every wait is bounded");
        }
    }

    /**
     * The cap in bytes on a device of {@code device}'s memory: as set, or the share of its total. Checks what depends
     * on the cap (the release threshold, the warm-up) and fails as {@link #build()} does.
     */
    long maxPoolSizeOn(DeviceMemoryInfo device, String backendName) {
        long bytes = switch (maxPoolSize) {
            case PoolSize.Bytes(long set) -> set;
            case PoolSize.Share share -> {
                if (device.totalBytes() <= 0) {
                    throw new InvalidSettingException(MAX_POOL_SIZE, maxPoolSize, "a size, such as 4GB: the " + backendName
                            + " backend does not report its device's total memory, so a share of it cannot be resolved");
                }
                long resolved = share.of(device.totalBytes());
                if (resolved <= 0) {
                    throw new InvalidSettingException(MAX_POOL_SIZE, maxPoolSize, "a share that comes to at least one byte of the device's "
                            + device.totalBytes() + " bytes, or a size, such as 4GB");
                }
                yield resolved;
            }
        };
        checkAgainstCap(bytes);
        return bytes;
    }

    /** The rules that compare settings with the cap, once it is known in bytes. */
    private void checkAgainstCap(long cap) {
        atLeastOnePoolSegment(MAX_POOL_SIZE, cap);
        if (releaseThreshold != null && releaseThreshold > cap) {
            throw new InvalidSettingException("compute.memory.pooling.release-threshold", releaseThreshold + " bytes",
                    "at most " + MAX_POOL_SIZE + " (" + cap + " bytes" + (maxPoolSize instanceof PoolSize.Share ? ", " + maxPoolSize + " of the device" : "")
                    + "): a pool cannot keep more cache than it may reserve");
        }
        PoolWarmup.checkAgainstCaps(warmup, cap, maxPinnedSize, releaseThresholdUnder(cap));
    }

    /** The settings as the manager runs with them, once the backend is open, the cap resolved and the default location chosen. */
    ManagerSettings resolved(String backendName, MemoryLocation chosenDefaultLocation, long maxPoolSizeBytes) {
        Map<MemoryLocation, List<WarmupBlocks>> warmupCopy = new EnumMap<>(MemoryLocation.class);
        warmup.forEach((location, entries) -> warmupCopy.put(location, List.copyOf(entries)));
        return new ManagerSettings(name.strip(), backendName, device, backendOptions, chosenDefaultLocation, poolingEnabled, maxPoolSizeBytes,
                maxPoolSize instanceof PoolSize.Share(double share) ? share : null, releaseThresholdUnder(maxPoolSizeBytes), trimInterval,
                compactionInterval, compactOnOutOfMemory, expandableSegments, warmupCopy, pinningEnabled, maxPinnedSize, stagingBufferSize(), leakDetection, timelineCapacity,
                timelineInterval, closeTimeout, deviceWaitTimeout, heldMemoryWarning, outOfMemoryRetries, maxOpenMappedFiles, allocationRecording);
    }

    /**
     * The release threshold set; unset, the default or the largest location's warm-up where that is more (a default
     * follows what the user set), at most the cap.
     */
    long releaseThresholdUnder(long cap) {
        if (releaseThreshold != null) {
            return releaseThreshold;
        }
        return Math.min(Math.max(DEFAULT_RELEASE_THRESHOLD, PoolWarmup.largestTotal(warmup)), cap);
    }

    /** The staging buffer size set, or the default where that fits under max-pinned-size, else max-pinned-size. */
    long stagingBufferSize() {
        return stagingBufferSize != null ? stagingBufferSize : Math.min(DEFAULT_STAGING_BUFFER_SIZE, maxPinnedSize);
    }

    private static void requireNonNull(String property, @Nullable Object value) {
        if (value == null) {
            throw new InvalidSettingException(property, "null", "a value is required");
        }
    }

    private static void positive(String property, long bytes) {
        if (bytes <= 0) {
            throw new InvalidSettingException(property, bytes + " bytes", "a positive size, such as 512MB or 4GB");
        }
    }

    /** A pool takes memory for blocks over 1 MiB in pieces of {@link PoolSettings#MIN_CAP_BYTES}, or more: a smaller cap is a mistake. */
    private void atLeastOnePoolSegment(String property, long cap) {
        if (poolingEnabled && cap < PoolSettings.MIN_CAP_BYTES) {
            throw new InvalidSettingException(property, cap + " bytes", "at least " + PoolSettings.MIN_CAP_BYTES
                    + " bytes (2MB) while pooling is on: the pool takes memory for blocks over 1 MiB in pieces of that size or more,"
                    + " so under a smaller cap none could ever be had; raise it, or turn pooling off (compute.memory.pooling.enabled=false)");
        }
    }

    private static void notNegative(String property, long bytes) {
        if (bytes < 0) {
            throw new InvalidSettingException(property, bytes + " bytes", "a size of 0 or more, such as 0 or 256MB");
        }
    }

    // The maintenance thread schedules in milliseconds: a positive interval under 1ms would silently mean off.
    private static void interval(String property, @Nullable Duration duration) {
        requireNonNull(property, duration);
        if (duration.isNegative() || duration.compareTo(MAX_DURATION) > 0 || (!duration.isZero() && duration.toMillis() == 0)) {
            throw new InvalidSettingException(property, duration, "0 (off) or a duration of at least 1ms and at most 365d, such as 30s or 5m");
        }
    }
}
