package dev.compute.boot;

import dev.compute.memory.InvalidSettingException;
import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.PoolSize;
import dev.compute.memory.UnifiedMemoryManagerBuilder;
import dev.compute.memory.recording.RecordingOptions;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Pattern;
import org.jspecify.annotations.Nullable;
import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.boot.context.properties.bind.DefaultValue;
import org.springframework.util.unit.DataSize;

/**
 * The {@code compute.*} properties: the settings of the one manager the starter builds, or, where
 * {@code compute.managers.<name>.*} names several, the defaults each of them inherits (see
 * {@link ManagerProperties}). The memory settings are checked where they are used, by
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
 * @param backendOptions Options passed to the backend as they are: cpu reads page-size and pinned-fallback,
 *     opencl platform and device-type, cuda streams, staging-buffers, staging-lanes and copy-threads.
 * @param health Thresholds of the compute health contributor.
 * @param primary With several managers (compute.managers), the name of the one injected where a single
 *     UnifiedMemoryManager is asked for; unset, the first one configured.
 * @param scopes The stretches of work that host views end with, and that may each get a budget of their own.
 * @param budgets Named budgets of the one manager of compute.*, by name (tenant-a): each a tenant's own allocator over
 *     the manager's pools, with its limits and reserved minimum, made as the manager is and closed with it. With
 *     compute.managers, each manager's are compute.managers.NAME.budgets, not inherited from here.
 */
@ConfigurationProperties("compute")
public record ComputeProperties(
        @DefaultValue("auto") String backend,
        @DefaultValue("0") int device,
        @DefaultValue Memory memory,
        @DefaultValue OpenCl opencl,
        @DefaultValue Map<String, String> backendOptions,
        @DefaultValue Health health,
        @Nullable String primary,
        @DefaultValue Scopes scopes,
        @DefaultValue Map<String, BudgetProperties> budgets) {

    public ComputeProperties {
        backendOptions = new LinkedHashMap<>(backendOptions);
        budgets = new LinkedHashMap<>(budgets);
    }

    /** The settings of the one manager that {@code compute.*} alone describes. */
    public ManagerProperties manager() {
        return new ManagerProperties(backend, device, memory, opencl, backendOptions);
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
     *     On an idle device the backend's close waits what is left, 1s at least, for the application's actions on
     *     device futures (thenRun and the like) still running, then keeps its context rather than release it under them.
     * @param deviceWaitTimeout The longest a call waits for device work it depends on (a read after a kernel, an
     *     allocation needing memory that work on a freed buffer still uses) before it fails saying the work may be stuck.
     * @param heldMemoryWarning How long a closed buffer's memory may wait for a view another thread still holds before
     *     a warning names that thread (the memory is counted as held, not live, meanwhile); a view taken outside any view
     *     scope then holds only the range: its pages go back to the operating system.
     * @param outOfMemoryRetries How many times one allocation is retried after the application's OutOfMemoryHandler
     *     beans freed memory, 0 to 100; 0 turns them off.
     * @param mappedFiles Files mapped as buffers (UnifiedMemoryManager.mapFile).
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
            @DefaultValue("1s") Duration heldMemoryWarning,
            @DefaultValue("3") int outOfMemoryRetries,
            @DefaultValue MappedFiles mappedFiles,
            @DefaultValue Recording recording) {}

    /**
     * @param requests Whether each web request (servlet) runs in a view scope: the host views its thread takes end when
     *     the request does, so a buffer closed on another thread gets its memory back then, however long the request's
     *     thread idles after.
     * @param tasks Whether each task of Spring Boot's task executors and schedulers runs in a view scope (a TaskDecorator,
     *     composed with the application's own).
     * @param requestBudgets Whether each web request (servlet) whose budget a RequestBudgetResolver names (by default,
     *     the configured budget named by the budget-header) runs in a budget of its own under it, BudgetScope.current()
     *     on its threads, closed as the request ends: what the request forgot to close is closed then and logged.
     * @param taskBudgets Whether each task of Spring Boot's task executors and schedulers submitted where a budget is
     *     current (a request's) runs in a budget of its own under that budget's tenant, closed as the task ends.
     * @param budgetHeader The request header that names the configured budget a request's own budget goes under, for the
     *     default RequestBudgetResolver: a budget's name (on the primary manager) or manager/name. Meant for callers the
     *     service trusts (a gateway sets it); a RequestBudgetResolver bean of your own replaces it.
     */
    public record Scopes(@DefaultValue("true") boolean requests, @DefaultValue("true") boolean tasks,
            @DefaultValue("false") boolean requestBudgets, @DefaultValue("false") boolean taskBudgets,
            @DefaultValue("X-Compute-Budget") String budgetHeader) {

        // RFC 9110's token: a blank name or one with a space or a colon is no header a request can carry, so every
        // request would run without a budget and nothing would say why
        private static final Pattern HEADER_NAME = Pattern.compile("[!#$%&'*+.^_`|~0-9A-Za-z-]+");

        public Scopes {
            if (!HEADER_NAME.matcher(budgetHeader.strip()).matches()) {
                throw new InvalidSettingException("compute.scopes.budget-header", budgetHeader,
                        "the name of an HTTP header, such as X-Compute-Budget: letters, digits and - (no spaces or colons)");
            }
            budgetHeader = budgetHeader.strip();
        }
    }

    /**
     * @param maxOpen The most files (or ranges of files) mapped at once; 0 turns mapping off. Each mapping takes an
     *     entry of the process's memory map, which the system limits (vm.max_map_count, 65530 by default on Linux).
     */
    public record MappedFiles(@DefaultValue("4096") int maxOpen) {}

    /**
     * @param enabled Whether freed blocks are cached for reuse; off, every allocation is a backend call.
     * @param maxPoolSize Cap on the bytes reserved from the backend per location: a size such as 4GB, or a share of
     *     the device's memory such as 80%, resolved at start (on the CPU backend, of the machine's memory).
     * @param releaseThreshold Cached bytes a trim keeps for reuse; at most max-pool-size. Unset: 256MB, or the largest
     *     location's warm-up where that is more, and at most max-pool-size.
     * @param trimInterval How often cached memory beyond the release threshold is given back, at least 1ms; 0
     *     disables scheduled trimming.
     * @param compactionInterval How often every location is compacted (buffers nothing holds move so that free
     *     space coalesces and emptied segments go back), at least 1ms; 0, the default, compacts only when asked.
     * @param compactOnOutOfMemory Whether an allocation that finds no memory, once the pool has given back what it
     *     caches, compacts its location and tries once more before the application's out-of-memory handlers are asked.
     * @param expandableSegments Whether the pool maps pages into reserved address ranges where the backend can,
     *     so reserved memory follows live memory closely.
     * @param warmup Blocks reserved and cached at start, per location (device, host, pinned, unified), so that the
     *     first requests make no backend call: a list of size and count (count 1 by default). A location's total
     *     must stay under release-threshold, which an unset release-threshold follows.
     */
    public record Pooling(
            @DefaultValue("true") boolean enabled,
            @DefaultValue("4GB") PoolSize maxPoolSize,
            @Nullable DataSize releaseThreshold,
            @DefaultValue("5m") Duration trimInterval,
            @DefaultValue("0") Duration compactionInterval,
            @DefaultValue("true") boolean compactOnOutOfMemory,
            @DefaultValue("true") boolean expandableSegments,
            @Nullable Map<String, List<WarmupSetting>> warmup) {}

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
     * @param platform The OpenCL platform to use, by its index as clinfo -l numbers them, or by a part of its name or
     *     vendor, any case (such as pocl or NVIDIA); unset, the first platform with a device of the wanted type.
     * @param deviceType The OpenCL device type to use: gpu, cpu, accelerator or
     *     all; unset, the backend's default.
     */
    public record OpenCl(@Nullable String platform, @Nullable String deviceType) {}

    /**
     * @param fragmentationWarningThreshold Fragmentation (1 − largest free block / cached bytes) of a location above
     *     which the health details carry a warning; between 0 and 1.
     * @param deviceMemoryWarningThreshold Share of the device's memory in use (by anyone) above which the health
     *     details carry a warning; between 0 and 1.
     * @param capWarningThreshold Share of a location's cap (max-pool-size, max-pinned-size for PINNED) that the pool
     *     has reserved above which the health details carry a warning; between 0 and 1.
     * @param budgetWarningThreshold Share of a budget's limit (at all locations, or at one where it has a limit there)
     *     that the budget holds above which the health details carry a warning; between 0 and 1.
     * @param statusOnWarning The health status when any threshold is passed: UP (the warning is a detail), a status
     *     of your own such as WARNING (add it to management.endpoint.health.status.order), OUT_OF_SERVICE or DOWN.
     */
    public record Health(
            @DefaultValue("0.5") double fragmentationWarningThreshold,
            @DefaultValue("0.9") double deviceMemoryWarningThreshold,
            @DefaultValue("0.9") double capWarningThreshold,
            @DefaultValue("0.9") double budgetWarningThreshold,
            @DefaultValue("UP") String statusOnWarning) {

        public Health {
            ratio("compute.health.fragmentation-warning-threshold", fragmentationWarningThreshold);
            ratio("compute.health.device-memory-warning-threshold", deviceMemoryWarningThreshold);
            ratio("compute.health.cap-warning-threshold", capWarningThreshold);
            ratio("compute.health.budget-warning-threshold", budgetWarningThreshold);
            if (statusOnWarning.isBlank()) {
                throw new InvalidSettingException("compute.health.status-on-warning", statusOnWarning,
                        "a health status: UP, OUT_OF_SERVICE, DOWN or one of your own such as WARNING");
            }
            // Boot's own codes are upper case with underscores; out-of-service and OUT_OF_SERVICE are the same status
            statusOnWarning = statusOnWarning.trim().toUpperCase(Locale.ROOT).replace('-', '_');
        }

        private static void ratio(String property, double value) {
            if (!(value >= 0.0 && value <= 1.0)) {
                throw new InvalidSettingException(property, value, "a fraction between 0 and 1, such as 0.5 or 0.9");
            }
        }
    }
}
