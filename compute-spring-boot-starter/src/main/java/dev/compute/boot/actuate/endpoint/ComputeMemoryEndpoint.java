package dev.compute.boot.actuate.endpoint;

import dev.compute.boot.actuate.RecentMemoryStatistics;
import dev.compute.memory.AllocationSites;
import dev.compute.memory.DeviceMemoryInfo;
import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemorySnapshot;
import dev.compute.memory.MemoryStatistics;
import dev.compute.memory.MemoryTimeline;
import dev.compute.memory.UnifiedMemoryManager;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;
import org.springframework.boot.actuate.endpoint.annotation.Endpoint;
import org.springframework.boot.actuate.endpoint.annotation.ReadOperation;
import org.springframework.boot.actuate.endpoint.annotation.Selector;
import org.springframework.boot.actuate.endpoint.annotation.WriteOperation;

/**
 * {@code /actuator/computememory}: what the pool holds. GET gives the summary per location and the leaks found, GET
 * {@code /{location}} its segments, blocks and timeline, POST trims (with {@code {"all": true}}, releases all
 * cached memory). Every size is in bytes and named so ({@code reservedBytes}); ratios are plain fractions. The
 * figures are the shared collection at most a second old ({@link RecentMemoryStatistics}), collected anew after
 * a trim; segments and blocks are taken on each GET. Nothing here reads the contents of memory, nor gives native
 * addresses.
 */
@Endpoint(id = "computememory")
public class ComputeMemoryEndpoint {

    /** The two fragmentation figures and the hit rate, defined once in {@link MemoryStatistics} and repeated here for the reader of the JSON. */
    static final Map<String, String> DEFINITIONS = Map.of(
            "fragmentation", "1 - largestFreeBlockBytes / cachedBytes: 0 when all cached memory is one block",
            "overhead", "reservedBytes / allocatedBytes: 1.0 when the pool holds nothing beyond live blocks, 0 when nothing is allocated",
            "hitRate", "poolHits / (poolHits + poolMisses): the share of allocations served without a backend call",
            "leaks", "detected: buffers garbage-collected without close() since start (all are tracked at leak-detection paranoid, "
                    + "one in " + LeakDetectionLevel.SIMPLE_SAMPLING_INTERVAL + " at simple); openBuffers: open buffers by "
                    + "call site, most bytes first, recorded at paranoid only; a site keeps the application's first frames");

    /** How many allocation sites the summary lists: enough to find a leak, bounded however many buffers are open. */
    static final int LEAK_SITES = 10;

    private final UnifiedMemoryManager manager;
    private final RecentMemoryStatistics statistics;

    public ComputeMemoryEndpoint(UnifiedMemoryManager manager, RecentMemoryStatistics statistics) {
        this.manager = manager;
        this.statistics = statistics;
    }

    @ReadOperation
    public ComputeMemoryDescriptor summary() {
        DeviceMemoryInfo memory = manager.deviceMemory();
        var info = manager.backendInfo();
        Map<MemoryLocation, LocationSummary> locations = new LinkedHashMap<>();
        statistics.statistics().forEach((location, figures) -> locations.put(location, LocationSummary.of(figures)));
        return new ComputeMemoryDescriptor(info.backend(),
                new DeviceDescriptor(info.deviceIndex(), info.deviceName(), info.deviceTotalBytes(), memory.freeBytes()),
                manager.defaultLocation(), locations, leaks(), DEFINITIONS);
    }

    private LeakDescriptor leaks() {
        List<OpenBuffersDescriptor> open = AllocationSites.summarize(manager.liveBuffers(), LEAK_SITES).stream()
                .map(site -> new OpenBuffersDescriptor(site.location(), site.buffers(), site.sizeBytes(), site.allocationSite())).toList();
        return new LeakDescriptor(manager.leaksDetected(), open);
    }

    /** One location in detail; {@code null} (a 404 over HTTP) for a location this manager does not have. */
    @ReadOperation
    public @Nullable LocationDescriptor location(@Selector MemoryLocation location) {
        if (!manager.locations().contains(location)) {
            return null;
        }
        MemorySnapshot snapshot = manager.snapshot(location);
        List<SegmentDescriptor> segments = new ArrayList<>(snapshot.segments().size());
        int index = 0;
        for (MemorySnapshot.Segment segment : snapshot.segments()) {
            List<BlockDescriptor> blocks = segment.blocks().stream().map(b -> new BlockDescriptor(b.offset(), b.sizeBytes(),
                    b.requestedBytes(), b.state(), AllocationSites.shorten(b.allocationSite()))).toList();
            segments.add(new SegmentDescriptor(index++, segment.sizeBytes(), segment.expandable(), blocks));
        }
        return new LocationDescriptor(location, LocationSummary.of(statistics.statistics(location)), segments, manager.timeline(location));
    }

    /** Gives cached memory beyond the release threshold back to the backend, or all of it with {@code all}. */
    @WriteOperation
    public TrimDescriptor trim(@Nullable Boolean all) {
        boolean releaseAll = Boolean.TRUE.equals(all);
        long released = releaseAll ? manager.releaseCachedMemory() : manager.trim();
        Map<MemoryLocation, Long> reserved = new LinkedHashMap<>();
        statistics.refresh().forEach((location, figures) -> reserved.put(location, figures.reservedBytes()));
        return new TrimDescriptor(releaseAll ? "all" : "beyond-release-threshold", released, reserved);
    }

    public record ComputeMemoryDescriptor(String backend, DeviceDescriptor device, MemoryLocation defaultLocation,
            Map<MemoryLocation, LocationSummary> locations, LeakDescriptor leaks, Map<String, String> definitions) {}

    /** Leaks found so far, and where the open buffers come from (a site that keeps growing is a leak still reachable). */
    public record LeakDescriptor(long detected, List<OpenBuffersDescriptor> openBuffers) {}

    /** Open buffers allocated at one site and location. */
    public record OpenBuffersDescriptor(MemoryLocation location, long buffers, long requestedBytes, String allocationSite) {}

    /** {@code freeBytes} and {@code totalBytes} are -1 where the backend cannot tell. */
    public record DeviceDescriptor(int index, String name, long totalBytes, long freeBytes) {}

    public record LocationSummary(long liveBuffers, long allocatedBytes, long allocatedBytesPeak, long requestedBytes,
            long requestedBytesPeak, long reservedBytes, long reservedBytesPeak, long cachedBytes, long largestFreeBlockBytes,
            long segments, double hitRate, double fragmentation, double overhead, Counts counts, CopiedBytes copiedBytes) {

        static LocationSummary of(MemoryStatistics s) {
            return new LocationSummary(s.liveBuffers(), s.allocatedBytes(), s.allocatedBytesPeak(), s.requestedBytes(),
                    s.requestedBytesPeak(), s.reservedBytes(), s.reservedBytesPeak(), s.cachedBytes(), s.largestFreeBlockBytes(),
                    s.segments(), s.hitRate(), s.fragmentation(), s.overhead(),
                    new Counts(s.allocations(), s.frees(), s.poolHits(), s.poolMisses(), s.backendAllocations(),
                            s.backendFrees(), s.oomRetries(), s.trims()),
                    new CopiedBytes(s.bytesHostToDevice(), s.bytesDeviceToHost(), s.bytesDeviceToDevice()));
        }
    }

    /** Totals since the manager started. */
    public record Counts(long allocations, long frees, long poolHits, long poolMisses, long backendAllocations,
            long backendFrees, long oomRetries, long trims) {}

    public record CopiedBytes(long hostToDevice, long deviceToHost, long deviceToDevice) {}

    public record LocationDescriptor(MemoryLocation location, LocationSummary summary, List<SegmentDescriptor> segments,
            List<MemoryTimeline.Sample> timeline) {}

    /** A segment by its position in the pool; blocks tile it, by offset. */
    public record SegmentDescriptor(int index, long sizeBytes, boolean expandable, List<BlockDescriptor> blocks) {}

    /** {@code allocationSite} is known for live blocks when leak detection is paranoid. */
    public record BlockDescriptor(long offsetBytes, long sizeBytes, long requestedBytes, MemorySnapshot.BlockState state,
            @Nullable String allocationSite) {}

    public record TrimDescriptor(String released, long releasedBytes, Map<MemoryLocation, Long> reservedBytesAfter) {}
}
