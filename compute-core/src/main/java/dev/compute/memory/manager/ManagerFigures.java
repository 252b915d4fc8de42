package dev.compute.memory.manager;

import dev.compute.memory.LiveBufferReport;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemorySnapshot;
import dev.compute.memory.MemoryStatistics;
import dev.compute.memory.MemoryTimeline;
import dev.compute.memory.lifetime.LeakDetector;
import dev.compute.memory.resource.InspectableResource;
import dev.compute.memory.resource.StatisticsResource;
import dev.compute.memory.resource.pool.CachingPoolResource;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.jspecify.annotations.Nullable;

/**
 * A manager's figures, each read from the part that owns it: counts from a chain's statistics adaptor, holdings from
 * its pool or backend resource, transfers and trims from the chain, waiting requests from the queues, mapped files
 * apart. Reading them changes nothing.
 */
public final class ManagerFigures {

    private final LocationChains chains;
    private final AllocationWaiters<?> waiters;
    private final MappedFiles mappedFiles;
    private final LeakDetector leakDetector;
    private @Nullable BufferServices buffers;

    public ManagerFigures(LocationChains chains, AllocationWaiters<?> waiters, MappedFiles mappedFiles, LeakDetector leakDetector) {
        this.chains = chains;
        this.waiters = waiters;
        this.mappedFiles = mappedFiles;
        this.leakDetector = leakDetector;
    }

    /** The buffers' host, which knows what closed buffers still hold; made after this (it needs the compactor, which needs this). */
    public void heldFrom(BufferServices buffers) {
        this.buffers = buffers;
    }

    private BufferServices.HeldFigures held(MemoryLocation location) {
        BufferServices known = buffers;
        return known == null ? new BufferServices.HeldFigures(0, 0, 0) : known.heldAt(location);
    }

    private long openMirrors(MemoryLocation location) {
        BufferServices known = buffers;
        return known == null ? 0 : known.openMirrorsAt(location);
    }



    public MemoryStatistics statistics(MemoryLocation location) {
        LocationChain chain = chains.known(location);
        // a closed buffer that views, accesses or ops still hold is no live buffer: its bytes are held, apart. Read
        // before the counts: a held block leaves the held figures only after its free is counted, so one given back
        // meanwhile is not counted live (see BufferServices#release)
        BufferServices.HeldFigures held = held(location);
        // a host mirror is memory the pool holds (its bytes are allocated) but no buffer the user opened
        long mirrors = openMirrors(location);
        StatisticsResource.Counts counts = chain.top.counts();
        InspectableResource holding = chain.holding;
        long reserved = holding.reservedBytes();
        // what closed buffers' device work still uses is no cache: nothing can be served from it until the work ends
        long heldByDeviceWork = chain.heldByDeviceWork();
        // nor is what a trim is giving back, reserved until the backend returns: nothing can be served from it either
        long beingReleased = chain.pool != null ? chain.pool.bytesBeingReleased() : 0;
        // nor what the backend did not finish freeing, out of use until a trim does
        beingReleased += chain.backend.unfinishedFreeBytes();
        long cached = Math.max(0, reserved - counts.allocatedBytes() - heldByDeviceWork - beingReleased);
        // read after the counts: a block freed in between (cached by the pool, its free not yet counted) can show here
        // and not in cached; no free block is larger than what is cached, and fragmentation stays within 0 and 1
        long reservationsCached = Math.min(holding.reservationsCachedBytes(), cached);
        long largestFree = Math.min(holding.largestFreeBlockBytes(), cached - reservationsCached);
        long allocated = Math.max(0, counts.allocatedBytes() - held.bytes());
        // the stripes' allocated bytes are summed before their requested ones, so a call counted in between can show in
        // requested alone; no block holds more than was set aside for it
        long requested = Math.clamp(counts.requestedBytes() - held.requestedBytes(), 0, allocated);
        CachingPoolResource pool = chain.pool;
        AllocationWaiters.Figures waiting = waiters.figures(location);
        return new MemoryStatistics(location,
                allocated, counts.allocatedBytesPeak(),
                requested, counts.requestedBytesPeak(),
                reserved, holding.reservedBytesPeak(), cached, largestFree, reservationsCached,
                Math.max(0, counts.liveBlocks() - held.buffers() - mirrors), holding.segmentCount(), counts.allocations(), counts.frees(),
                pool != null ? pool.poolHits() : 0, pool != null ? pool.poolMisses() : chain.backend.backendAllocations(),
                chain.backend.backendAllocations(), chain.backend.backendFrees(), pool != null ? pool.oomRetries() : 0,
                chain.trims(), chain.hostToDevice.sum(), chain.deviceToHost.sum(), chain.deviceToDevice.sum(),
                waiting.waiting(), waiting.waits(), waiting.timeouts(),
                held.buffers() + chain.blocksHeldByDeviceWork(), held.bytes() + heldByDeviceWork);
    }

    public Map<MemoryLocation, MemoryStatistics> statistics() {
        Map<MemoryLocation, MemoryStatistics> all = new LinkedHashMap<>();
        for (MemoryLocation location : chains.locations()) {
            all.put(location, statistics(location));
        }
        return all;
    }

    /** The location's segments and blocks; a block a closed buffer's views still hold is HELD, not LIVE. */
    public MemorySnapshot snapshot(MemoryLocation location) {
        BufferServices known = buffers;
        // read before the blocks, as the statistics read the held figures: a held block given back meanwhile shows FREE, never LIVE
        Set<String> held = known == null ? Set.of() : known.heldPlaces(location);
        List<MemorySnapshot.Segment> segments = leakDetector.withSites(location, chains.known(location).holding.segments());
        if (held.isEmpty()) {
            return new MemorySnapshot(location, segments);
        }
        List<MemorySnapshot.Segment> marked = new ArrayList<>(segments.size());
        for (MemorySnapshot.Segment segment : segments) {
            List<MemorySnapshot.Block> blocks = new ArrayList<>(segment.blocks().size());
            for (MemorySnapshot.Block block : segment.blocks()) {
                blocks.add(block.state() == MemorySnapshot.BlockState.LIVE && held.contains(segment.address() + ":" + block.offset())
                        ? new MemorySnapshot.Block(block.offset(), block.sizeBytes(), MemorySnapshot.BlockState.HELD, block.requestedBytes(),
                                block.allocationSite())
                        : block);
            }
            marked.add(new MemorySnapshot.Segment(segment.address(), segment.sizeBytes(), segment.expandable(), blocks));
        }
        return new MemorySnapshot(location, marked);
    }

    public List<MemoryTimeline.Sample> timeline(MemoryLocation location) {
        return chains.known(location).timeline.samples();
    }

    /** Adds one sample per location to its timeline. */
    void sampleTimeline() {
        long now = System.currentTimeMillis();
        for (MemoryLocation location : chains.locations()) {
            MemoryStatistics s = statistics(location);
            chains.known(location).timeline.add(new MemoryTimeline.Sample(now, s.reservedBytes(), s.allocatedBytes(), s.cachedBytes()));
        }
    }

    /**
     * Every live block of every pool but the open buffers' host mirrors (no buffer of the user's), with its site where
     * known, and every mapped file whose buffer is open.
     */
    public List<LiveBufferReport> liveBuffers() {
        List<LiveBufferReport> live = new ArrayList<>();
        BufferServices known = buffers;
        for (MemoryLocation location : chains.locations()) {
            Set<String> mirrors = known == null ? Set.of() : known.openMirrorPlaces(location);
            for (MemorySnapshot.Segment segment : snapshot(location).segments()) {
                for (MemorySnapshot.Block block : segment.blocks()) {
                    if (block.state() == MemorySnapshot.BlockState.LIVE && !mirrors.contains(segment.address() + ":" + block.offset())) {
                        live.add(new LiveBufferReport(location, block.requestedBytes(), block.allocationSite()));
                    }
                }
            }
        }
        for (MappedFile mapping : mappedFiles.open()) {
            // a closed buffer's mapping stays while views or device work use it: held first, as its release marks it
            // given back before it leaves the held ones, so that one going back meanwhile is never counted live
            if ((known != null && known.holds(mapping)) || mapping.released()) {
                continue;
            }
            live.add(new LiveBufferReport(MemoryLocation.HOST, mapping.size(), mapping.allocationSite(), mapping.range().file()));
        }
        return live;
    }

    /** What every location reserves now, for a log line: a location that cannot say counts nothing. */
    long reservedBytes() {
        long reserved = 0;
        for (MemoryLocation location : chains.locations()) {
            try {
                reserved += statistics(location).reservedBytes();
            } catch (RuntimeException e) {
                // a figure for the log only
            }
        }
        return reserved;
    }
}
