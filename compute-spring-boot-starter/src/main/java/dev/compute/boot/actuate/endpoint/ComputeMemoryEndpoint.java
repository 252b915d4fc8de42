package dev.compute.boot.actuate.endpoint;

import dev.compute.boot.ComputeBudgets;
import dev.compute.boot.actuate.ObservedManagers;
import dev.compute.boot.actuate.ObservedManagers.ObservedManager;
import dev.compute.boot.actuate.RecentMemoryStatistics;
import dev.compute.memory.AllocationSites;
import dev.compute.memory.BackendInfo;
import dev.compute.memory.DeviceMemoryInfo;
import dev.compute.memory.CompactionReport;
import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.ManagerSettings;
import dev.compute.memory.MappedFileStatistics;
import dev.compute.memory.BudgetStatistics;
import dev.compute.memory.MemoryBudget;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemorySnapshot;
import dev.compute.memory.MemoryStatistics;
import dev.compute.memory.MemoryTimeline;
import dev.compute.memory.UnifiedMemoryManager;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.jspecify.annotations.Nullable;
import org.springframework.boot.actuate.endpoint.Access;
import org.springframework.boot.actuate.endpoint.InvalidEndpointRequestException;
import org.springframework.boot.actuate.endpoint.OperationResponseBody;
import org.springframework.boot.actuate.endpoint.annotation.Endpoint;
import org.springframework.boot.actuate.endpoint.annotation.ReadOperation;
import org.springframework.boot.actuate.endpoint.annotation.Selector;
import org.springframework.boot.actuate.endpoint.annotation.WriteOperation;

/**
 * {@code /actuator/computememory}: what the pools of every manager hold ({@link ObservedManagers}).
 * <ul>
 *   <li>GET: the managers by name, and the primary manager's summary (per location, and the leaks found) as it was
 *       when there was only one;</li>
 *   <li>GET {@code /{name}}: one manager's summary, the settings it runs with and its budgets (each with its figures,
 *       whether {@code compute.budgets} configured it, and the budgets under it: requests' and tasks' own); for a name
 *       that is no manager's but a location's, that location of the primary manager, as before there were several;</li>
 *   <li>GET {@code /{name}/{location}}: one location's segments, blocks and timeline; at most
 *       {@value #DEFAULT_MAX_BLOCKS} blocks, or {@code ?maxBlocks=}, the rest left out and counted;</li>
 *   <li>POST trims every manager, or the one {@code name}d (with {@code "all": true}, releases all cached memory;
 *       with {@code "compact": true}, defragments first and reports what moved).
 *       Read-only by default: {@code management.endpoint.computememory.access=unrestricted} allows it.</li>
 * </ul>
 * Every size is in bytes and named so ({@code reservedBytes}); ratios are plain fractions. The figures are the
 * shared collection at most a second old ({@link RecentMemoryStatistics}), collected anew after a trim; segments and
 * blocks are taken on each GET. Results are {@link OperationResponseBody}: Actuator writes them with its own JSON
 * mapper, whatever the application's {@code spring.jackson.*} says. Nothing here reads the contents of memory, nor
 * gives native addresses.
 */
@Endpoint(id = "computememory", defaultAccess = Access.READ_ONLY)
public class ComputeMemoryEndpoint {

    /** The two fragmentation figures and the hit rate, defined once in {@link MemoryStatistics} and repeated here for the reader of the JSON. */
    static final Map<String, String> DEFINITIONS = Map.of(
            "fragmentation", "1 - largestFreeBlockBytes / (cachedBytes - reservationsCachedBytes): 0 when all cached memory outside budgets' "
                    + "reservations is one block",
            "overhead", "reservedBytes / allocatedBytes: 1.0 when the pool holds nothing beyond live blocks, 0 when nothing is allocated",
            "hitRate", "poolHits / (poolHits + poolMisses): the share of allocations served without a backend call",
            "leaks", "detected: buffers garbage-collected without close() since start (all are tracked at leak-detection paranoid, "
                    + "one in " + LeakDetectionLevel.SIMPLE_SAMPLING_INTERVAL + " at simple); openBuffers: open buffers by "
                    + "call site, most bytes first, recorded at paranoid only; a site keeps the application's first frames");

    /** How many allocation sites the summary lists: enough to find a leak, bounded however many buffers are open. */
    static final int LEAK_SITES = 10;

    /**
     * How many blocks a location's answer lists unless asked for more or fewer: a pool of a hundred thousand live
     * blocks would otherwise answer megabytes of JSON on every refresh of the page.
     */
    static final int DEFAULT_MAX_BLOCKS = 10_000;

    /** How many budgets under one budget (requests' and tasks' own) a manager's description lists. */
    static final int BUDGETS_UNDER = 20;

    private final ObservedManagers managers;
    private final ComputeBudgets configured;

    public ComputeMemoryEndpoint(ObservedManagers managers) {
        this(managers, new ComputeBudgets());
    }

    /** With the budgets the starter configured, which the description marks as such. */
    public ComputeMemoryEndpoint(ObservedManagers managers, ComputeBudgets configured) {
        this.managers = managers;
        this.configured = configured;
    }

    @ReadOperation
    public ComputeMemoryDescriptor summary() {
        Map<String, ManagerEntry> entries = new LinkedHashMap<>();
        for (ObservedManager observed : managers.all()) {
            UnifiedMemoryManager manager = observed.manager();
            entries.put(observed.name(), new ManagerEntry(manager.backendInfo().backend(), device(observed), manager.defaultLocation(),
                    manager.locations(), observed.primary()));
        }
        ManagerDescriptor primary = managers.primary().map(this::describe).orElse(null);
        if (primary == null) {
            return new ComputeMemoryDescriptor(entries, null, null, null, null, null, null, null, DEFINITIONS);
        }
        return new ComputeMemoryDescriptor(entries, primary.name(), primary.backend(), primary.device(), primary.defaultLocation(),
                primary.locations(), primary.leaks(), primary.mappedFiles(), DEFINITIONS);
    }

    /**
     * The manager of this name; else, for a location's name ({@code host}), that location of the primary manager;
     * {@code null} (a 404 over HTTP) for neither.
     */
    public @Nullable Selection manager(String name, @Nullable Integer maxBlocks) {
        return selection(name, maxBlocks == null ? null : maxBlocks.toString());
    }

    /**
     * {@link #manager(String, Integer)} over HTTP: {@code maxBlocks} as written, read once the manager or location is
     * found, so that what is not there is a 404 whatever the parameter says ({@code ?maxBlocks=abc} too).
     */
    @ReadOperation
    public @Nullable Selection selection(@Selector String name, @Nullable String maxBlocks) {
        var observed = managers.get(name);
        if (observed.isPresent()) {
            return describe(observed.get());
        }
        MemoryLocation location = locationNamed(name);
        return location == null ? null : managers.primary().map(primary -> location(primary, location, maxBlocks)).orElse(null);
    }

    /** {@link #manager(String, Integer)} with the default number of blocks. */
    public @Nullable Selection manager(String name) {
        return selection(name, null);
    }

    /**
     * One location of one manager in detail, with at most {@code maxBlocks} blocks ({@value #DEFAULT_MAX_BLOCKS} when
     * {@code null}); {@code null} (a 404 over HTTP) for a manager or location that is not there.
     */
    public @Nullable LocationDescriptor location(String name, MemoryLocation location, @Nullable Integer maxBlocks) {
        return located(name, location, maxBlocks == null ? null : maxBlocks.toString());
    }

    /**
     * {@link #location(String, MemoryLocation, Integer)} over HTTP: the location as written, so that one no location has
     * ({@code /bogus}) is a 404 as a manager that is not there is, and {@code maxBlocks} read as {@link #selection} reads it.
     */
    @ReadOperation
    public @Nullable LocationDescriptor locationOf(@Selector String name, @Selector String location, @Nullable String maxBlocks) {
        MemoryLocation named = locationNamed(location);
        return named == null ? null : located(name, named, maxBlocks);
    }

    /** {@link #location(String, MemoryLocation, Integer)} with the default number of blocks. */
    public @Nullable LocationDescriptor location(String name, MemoryLocation location) {
        return located(name, location, null);
    }

    private @Nullable LocationDescriptor located(String name, MemoryLocation location, @Nullable String maxBlocks) {
        return managers.get(name).map(observed -> location(observed, location, maxBlocks)).orElse(null);
    }

    private static int maxBlocks(@Nullable String asked) {
        if (asked == null) {
            return DEFAULT_MAX_BLOCKS;
        }
        int blocks;
        try {
            blocks = Integer.parseInt(asked.strip());
        } catch (NumberFormatException e) {
            throw new InvalidEndpointRequestException("maxBlocks must be a whole number: " + asked, "maxBlocks must be a whole number, 0 or more");
        }
        if (blocks < 0) {
            throw new InvalidEndpointRequestException("maxBlocks must not be negative: " + asked, "maxBlocks must be 0 or more");
        }
        return blocks;
    }

    /**
     * Gives cached memory beyond the release threshold back to the backend, or all of it with {@code all}, in every
     * manager or in the one {@code name}d. With {@code compact}, defragments first
     * ({@link UnifiedMemoryManager#compact()}: buffers nothing holds move so that free space coalesces) and says, per
     * location, what moved and the figures before and after.
     */
    @WriteOperation
    public OperationResponseBody trim(@Nullable Boolean all, @Nullable Boolean compact, @Nullable String name) {
        List<ObservedManager> chosen;
        if (name == null) {
            chosen = List.copyOf(managers.all());
        } else {
            chosen = List.of(managers.get(name).orElseThrow(() -> new InvalidEndpointRequestException("No compute memory manager named '"
                    + name + "'", "no manager named '" + name + "'; managers: " + String.join(", ", managers.byName().keySet()))));
        }
        boolean releaseAll = Boolean.TRUE.equals(all);
        return Boolean.TRUE.equals(compact) ? compact(chosen, releaseAll) : trim(chosen, releaseAll);
    }

    private TrimDescriptor trim(List<ObservedManager> chosen, boolean releaseAll) {
        long total = 0;
        Map<String, ManagerTrim> results = new LinkedHashMap<>();
        for (ObservedManager observed : chosen) {
            long released = releaseAll ? observed.manager().releaseCachedMemory() : observed.manager().trim();
            results.put(observed.name(), new ManagerTrim(released, reservedNow(observed)));
            total += released;
        }
        return new TrimDescriptor(releaseAll ? "all" : "beyond-release-threshold", total, results);
    }

    private CompactionDescriptor compact(List<ObservedManager> chosen, boolean releaseAll) {
        long total = 0;
        Map<String, ManagerCompaction> results = new LinkedHashMap<>();
        for (ObservedManager observed : chosen) {
            Map<MemoryLocation, LocationCompaction> byLocation = new LinkedHashMap<>();
            long released = 0;
            for (CompactionReport report : compactUnlessClosed(observed.manager())) {
                byLocation.put(report.location(), LocationCompaction.of(report));
                released += report.bytesReleased();
            }
            if (releaseAll) {
                released += observed.manager().releaseCachedMemory();
            }
            results.put(observed.name(), new ManagerCompaction(released, reservedNow(observed), byLocation));
            total += released;
        }
        return new CompactionDescriptor(releaseAll ? "all" : "beyond-release-threshold", total, results);
    }

    /**
     * The manager's compaction; none for a closed manager (closed before, or while, it is asked), which has nothing left
     * to move, as its trim releases nothing: one closed manager does not fail the request for the others.
     */
    private static List<CompactionReport> compactUnlessClosed(UnifiedMemoryManager manager) {
        if (manager.isClosed()) {
            return List.of();
        }
        try {
            return manager.compact();
        } catch (IllegalStateException e) {
            if (manager.isClosed()) {
                return List.of();
            }
            throw e;
        }
    }

    /** Each location's reserved bytes, collected anew (the shared collection is older than what was just changed). */
    private static Map<MemoryLocation, Long> reservedNow(ObservedManager observed) {
        Map<MemoryLocation, Long> reserved = new LinkedHashMap<>();
        observed.statistics().refresh().forEach((location, figures) -> reserved.put(location, figures.reservedBytes()));
        return reserved;
    }

    private ManagerDescriptor describe(ObservedManager observed) {
        UnifiedMemoryManager manager = observed.manager();
        Map<MemoryLocation, LocationSummary> locations = new LinkedHashMap<>();
        observed.statistics().statistics().forEach((location, figures) -> locations.put(location, LocationSummary.of(figures)));
        return new ManagerDescriptor(observed.name(), observed.primary(), manager.isClosed(), manager.backendInfo().backend(), device(observed),
                manager.defaultLocation(), locations, leaks(manager), observed.statistics().mappedFiles(),
                SettingsDescriptor.of(manager.settings()),
                manager.budgets().stream().map(this::budget).toList(), DEFINITIONS);
    }

    private BudgetDescriptor budget(MemoryBudget budget) {
        List<MemoryBudget> under = budget.children();
        return BudgetDescriptor.of(budget.statistics(), configured.isConfigured(budget), under.size(),
                under.stream().limit(BUDGETS_UNDER).map(this::budget).toList());
    }

    private static DeviceDescriptor device(ObservedManager observed) {
        BackendInfo info = observed.manager().backendInfo();
        DeviceMemoryInfo memory;
        try {
            memory = observed.statistics().deviceMemory();
        } catch (RuntimeException driverFailed) {
            // unknown, as a backend that cannot tell says: the pool's figures need no driver, and health reports the failure
            memory = DeviceMemoryInfo.UNKNOWN;
        }
        return new DeviceDescriptor(info.deviceIndex(), info.deviceName(), info.deviceTotalBytes(), memory.freeBytes());
    }

    private static @Nullable LocationDescriptor location(ObservedManager observed, MemoryLocation location, @Nullable String askedBlocks) {
        UnifiedMemoryManager manager = observed.manager();
        if (!manager.locations().contains(location)) {
            return null;
        }
        // checked once the location is found: what is not there is a 404 whatever the parameters of its answer
        int maxBlocks = maxBlocks(askedBlocks);
        MemorySnapshot snapshot = manager.snapshot(location);
        List<SegmentDescriptor> segments = new ArrayList<>(snapshot.segments().size());
        // many blocks share a site (paranoid keeps one per block): each distinct one is shortened once per answer
        Map<String, String> shortened = new HashMap<>();
        int index = 0;
        int room = maxBlocks;
        int leftOut = 0;
        for (MemorySnapshot.Segment segment : snapshot.segments()) {
            // every segment is listed; its first blocks while there is room, the rest counted
            int shown = Math.min(room, segment.blocks().size());
            List<BlockDescriptor> blocks = segment.blocks().subList(0, shown).stream().map(b -> new BlockDescriptor(b.offset(), b.sizeBytes(),
                    b.requestedBytes(), b.state(), b.allocationSite() == null ? null
                            : shortened.computeIfAbsent(b.allocationSite(), AllocationSites::shorten))).toList();
            int segmentLeftOut = segment.blocks().size() - shown;
            segments.add(new SegmentDescriptor(index++, segment.sizeBytes(), segment.expandable(), blocks, segmentLeftOut));
            room -= shown;
            leftOut += segmentLeftOut;
        }
        return new LocationDescriptor(observed.name(), location, LocationSummary.of(observed.statistics().statistics(location)), segments,
                leftOut, manager.timeline(location));
    }

    static @Nullable MemoryLocation locationNamed(String name) {
        // lower-cased, not upper-cased: toUpperCase makes hoſt (a long s) HOST and pınned (a dotless i) PINNED
        String lowerCase = name.toLowerCase(Locale.ROOT);
        for (MemoryLocation location : MemoryLocation.values()) {
            if (location.name().toLowerCase(Locale.ROOT).equals(lowerCase)) {
                return location;
            }
        }
        return null;
    }

    private static LeakDescriptor leaks(UnifiedMemoryManager manager) {
        if (manager.settings().leakDetection() != LeakDetectionLevel.PARANOID) {
            // only paranoid keeps allocation sites: the snapshot of every live buffer would be read for nothing
            return new LeakDescriptor(manager.leaksDetected(), List.of());
        }
        List<OpenBuffersDescriptor> open = AllocationSites.summarize(manager.liveBuffers(), LEAK_SITES).stream()
                .map(site -> new OpenBuffersDescriptor(site.location(), site.buffers(), site.sizeBytes(), site.allocationSite())).toList();
        return new LeakDescriptor(manager.leaksDetected(), open);
    }

    /** What {@code GET /{name}} returns: a manager, or (the older path) a location of the primary manager. */
    public sealed interface Selection extends OperationResponseBody permits ManagerDescriptor, LocationDescriptor {}

    /**
     * The managers by name; then the primary manager's summary, as the endpoint gave it before there were several
     * managers (all {@code null} where several managers have none primary).
     */
    public record ComputeMemoryDescriptor(Map<String, ManagerEntry> managers, @Nullable String primary, @Nullable String backend,
            @Nullable DeviceDescriptor device, @Nullable MemoryLocation defaultLocation, @Nullable Map<MemoryLocation, LocationSummary> locations,
            @Nullable LeakDescriptor leaks, @Nullable MappedFileStatistics mappedFiles, Map<String, String> definitions)
            implements OperationResponseBody {}

    /** A manager in the list: what it runs on, where its memory is. */
    public record ManagerEntry(String backend, DeviceDescriptor device, MemoryLocation defaultLocation, List<MemoryLocation> locations,
            boolean primary) {}

    /**
     * One manager: its summary per location, its leaks, the files it has mapped (no location's figures count them), the
     * settings it runs with and its open budgets (those it made); {@code closed} once the manager is closed, its
     * figures then what the close left (nothing, once it freed everything).
     */
    public record ManagerDescriptor(String name, boolean primary, boolean closed, String backend, DeviceDescriptor device, MemoryLocation defaultLocation,
            Map<MemoryLocation, LocationSummary> locations, LeakDescriptor leaks, MappedFileStatistics mappedFiles, SettingsDescriptor settings,
            List<BudgetDescriptor> budgets, Map<String, String> definitions) implements Selection {}

    /**
     * An open budget ({@link BudgetStatistics}: a child's bytes count in every budget above it), whether the starter
     * configured it ({@code compute.budgets}), the share of its fullest limit it holds, and the budgets under it (a
     * request's or a task's own): how many, and the first {@value ComputeMemoryEndpoint#BUDGETS_UNDER}.
     *
     * @param name its path: {@code tenant-a/request-17}
     */
    public record BudgetDescriptor(String name, boolean configured, long limitBytes, long allocatedBytes, long allocatedBytesPeak,
            double usedShare, long liveBuffers, long allocations, long refusals, long reservedBytes, long waitingRequests, long mappedFiles,
            long mappedBytes, Map<MemoryLocation, BudgetStatistics.Location> locations, int budgetsUnder, List<BudgetDescriptor> budgets) {

        static BudgetDescriptor of(BudgetStatistics s, boolean configured, int budgetsUnder, List<BudgetDescriptor> budgets) {
            return new BudgetDescriptor(s.name(), configured, s.limitBytes(), s.allocatedBytes(), s.allocatedBytesPeak(), s.usedShare(),
                    s.liveBuffers(), s.allocations(), s.refusals(), s.reservedBytes(), s.waitingRequests(), s.mappedFiles(), s.mappedBytes(),
                    s.locations(), budgetsUnder, budgets);
        }
    }

    /** Leaks found so far, and where the open buffers come from (a site that keeps growing is a leak still reachable). */
    public record LeakDescriptor(long detected, List<OpenBuffersDescriptor> openBuffers) {}

    /** Open buffers allocated at one site and location. */
    public record OpenBuffersDescriptor(MemoryLocation location, long buffers, long requestedBytes, String allocationSite) {}

    /** {@code freeBytes} and {@code totalBytes} are -1 where the backend cannot tell. */
    public record DeviceDescriptor(int index, String name, long totalBytes, long freeBytes) {}

    /**
     * The settings a manager runs with ({@link UnifiedMemoryManager#settings()}): what was set and the defaults for
     * the rest, the backend that {@code auto} chose. Sizes in bytes, durations in ISO-8601 ({@code PT5M}).
     */
    public record SettingsDescriptor(String backend, int device, Map<String, String> backendOptions, MemoryLocation defaultLocation,
            boolean poolingEnabled, long maxPoolSizeBytes, long releaseThresholdBytes, String trimInterval, String compactionInterval,
            boolean compactOnOutOfMemory, boolean expandableSegments,
            boolean pinningEnabled, long maxPinnedSizeBytes, long stagingBufferSizeBytes, LeakDetectionLevel leakDetection,
            int timelineCapacity, String timelineInterval, String closeTimeout, String deviceWaitTimeout, String heldMemoryWarning,
            int outOfMemoryRetries) {

        static SettingsDescriptor of(ManagerSettings s) {
            return new SettingsDescriptor(s.backend(), s.device(), s.backendOptions(), s.defaultLocation(), s.poolingEnabled(),
                    s.maxPoolSize(), s.releaseThreshold(), s.trimInterval().toString(), s.compactionInterval().toString(),
                    s.compactOnOutOfMemory(), s.expandableSegments(), s.pinningEnabled(),
                    s.maxPinnedSize(), s.stagingBufferSize(), s.leakDetection(), s.timelineCapacity(), s.timelineInterval().toString(),
                    s.closeTimeout().toString(), s.deviceWaitTimeout().toString(), s.heldMemoryWarning().toString(), s.outOfMemoryRetries());
        }
    }

    /**
     * {@code heldBuffers} and {@code heldBytes}: closed buffers whose memory waits for a view another thread holds;
     * {@code reservationsCachedBytes}: the part of the cached bytes that only requests under budgets' reservations take;
     * {@code waitingRequests}: {@code allocateAsync} requests queued for memory here now.
     */
    public record LocationSummary(long liveBuffers, long allocatedBytes, long allocatedBytesPeak, long requestedBytes,
            long requestedBytesPeak, long reservedBytes, long reservedBytesPeak, long cachedBytes, long heldBuffers, long heldBytes,
            long largestFreeBlockBytes, long reservationsCachedBytes, long segments, long waitingRequests, double hitRate, double fragmentation,
            double overhead, Counts counts, CopiedBytes copiedBytes) {

        static LocationSummary of(MemoryStatistics s) {
            return new LocationSummary(s.liveBuffers(), s.allocatedBytes(), s.allocatedBytesPeak(), s.requestedBytes(),
                    s.requestedBytesPeak(), s.reservedBytes(), s.reservedBytesPeak(), s.cachedBytes(), s.heldBuffers(), s.heldBytes(),
                    s.largestFreeBlockBytes(), s.reservationsCachedBytes(),
                    s.segments(), s.waitingRequests(), s.hitRate(), s.fragmentation(), s.overhead(),
                    new Counts(s.allocations(), s.frees(), s.poolHits(), s.poolMisses(), s.backendAllocations(),
                            s.backendFrees(), s.oomRetries(), s.trims(), s.waits(), s.waitTimeouts()),
                    new CopiedBytes(s.bytesHostToDevice(), s.bytesDeviceToHost(), s.bytesDeviceToDevice()));
        }
    }

    /** Totals since the manager started; {@code waits} and {@code waitTimeouts}: {@code allocateAsync} requests that queued, and gave up. */
    public record Counts(long allocations, long frees, long poolHits, long poolMisses, long backendAllocations,
            long backendFrees, long oomRetries, long trims, long waits, long waitTimeouts) {}

    public record CopiedBytes(long hostToDevice, long deviceToHost, long deviceToDevice) {}

    /**
     * One location of the manager {@code manager}; {@code blocksLeftOut}: the blocks of its segments beyond the answer's
     * {@code maxBlocks}, 0 when every block is listed.
     */
    public record LocationDescriptor(String manager, MemoryLocation location, LocationSummary summary, List<SegmentDescriptor> segments,
            int blocksLeftOut, List<MemoryTimeline.Sample> timeline) implements Selection {}

    /**
     * A segment by its position in the pool; blocks tile it, by offset, where {@code blocksLeftOut} is 0; else its
     * first blocks are listed and that many after them are not.
     */
    public record SegmentDescriptor(int index, long sizeBytes, boolean expandable, List<BlockDescriptor> blocks, int blocksLeftOut) {}

    /** {@code allocationSite} is known for live blocks when leak detection is paranoid. */
    public record BlockDescriptor(long offsetBytes, long sizeBytes, long requestedBytes, MemorySnapshot.BlockState state,
            @Nullable String allocationSite) {}

    /** {@code releasedBytes}: in all the managers trimmed; then, per manager, its own and what it holds after. */
    public record TrimDescriptor(String released, long releasedBytes, Map<String, ManagerTrim> managers) implements OperationResponseBody {}

    public record ManagerTrim(long releasedBytes, Map<MemoryLocation, Long> reservedBytesAfter) {}

    /** {@code releasedBytes}: in all the managers compacted; then, per manager, its own, what it holds after, and each location's report. */
    public record CompactionDescriptor(String released, long releasedBytes, Map<String, ManagerCompaction> managers) implements OperationResponseBody {}

    public record ManagerCompaction(long releasedBytes, Map<MemoryLocation, Long> reservedBytesAfter,
            Map<MemoryLocation, LocationCompaction> locations) {}

    /** One location's {@link CompactionReport}, the duration in milliseconds. */
    public record LocationCompaction(long buffersMoved, long bytesMoved, long buffersInUse, long releasedBytes,
            long reservedBytesBefore, long reservedBytesAfter, long largestFreeBlockBytesBefore, long largestFreeBlockBytesAfter,
            double fragmentationBefore, double fragmentationAfter, double durationMillis) {

        static LocationCompaction of(CompactionReport r) {
            return new LocationCompaction(r.buffersMoved(), r.bytesMoved(), r.buffersInUse(), r.bytesReleased(), r.reservedBytesBefore(),
                    r.reservedBytesAfter(), r.largestFreeBlockBytesBefore(), r.largestFreeBlockBytesAfter(), r.fragmentationBefore(),
                    r.fragmentationAfter(), r.duration().toNanos() / 1e6);
        }
    }
}
