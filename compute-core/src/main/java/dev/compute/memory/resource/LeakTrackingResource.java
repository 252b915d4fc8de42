package dev.compute.memory.resource;

import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.MemorySnapshot;
import dev.compute.memory.MemoryStatistics;
import dev.compute.memory.spi.NativeAllocation;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ThreadLocalRandom;
import org.jspecify.annotations.Nullable;

/**
 * Chooses which allocations are tracked for leaks and remembers, for those, where they were allocated:
 * none at {@code disabled}, one in {@value LeakDetectionLevel#SIMPLE_SAMPLING_INTERVAL} at {@code simple}
 * (without the site: taking a stack trace is the expensive part), every one with its stack trace at
 * {@code paranoid}. A tracked allocation is handed out wrapped ({@link TrackedBlock}), so an untracked one,
 * the common case, costs no lookup when it is asked about or freed: a shared map consulted on every free
 * made frees on two threads meet on its bins. The manager watches tracked buffers with a
 * {@link java.lang.ref.Cleaner}; this resource adds the sites to snapshots. Thread-safe.
 */
public final class LeakTrackingResource implements MemoryResource {

    /** A tracked allocation: the upstream's block and where it was allocated ({@code null}: not recorded). */
    private static final class TrackedBlock implements Block {
        final Block block;
        final @Nullable String site;

        TrackedBlock(Block block, @Nullable String site) {
            this.block = block;
            this.site = site;
        }

        @Override
        public NativeAllocation segment() {
            return block.segment();
        }

        @Override
        public long offset() {
            return block.offset();
        }

        @Override
        public long size() {
            return block.size();
        }

        @Override
        public long requestedSize() {
            return block.requestedSize();
        }
    }

    private final MemoryResource upstream;
    private final LeakDetectionLevel level;
    private final Set<TrackedBlock> tracked = ConcurrentHashMap.newKeySet();

    public LeakTrackingResource(MemoryResource upstream, LeakDetectionLevel level) {
        this.upstream = upstream;
        this.level = level;
    }

    @Override
    public Block allocate(long bytes) {
        Block block = upstream.allocate(bytes);
        TrackedBlock trackedBlock = switch (level) {
            case DISABLED -> null;
            case SIMPLE -> ThreadLocalRandom.current().nextInt(LeakDetectionLevel.SIMPLE_SAMPLING_INTERVAL) == 0
                    ? new TrackedBlock(block, null) : null;
            case PARANOID -> new TrackedBlock(block, allocationSite());
        };
        if (trackedBlock == null) {
            return block;
        }
        tracked.add(trackedBlock);
        return trackedBlock;
    }

    /** True when the buffer made from this block should be watched for a leak. */
    public boolean isTracked(Block block) {
        return block instanceof TrackedBlock;
    }

    /** Where the block was allocated, when recorded. */
    public @Nullable String allocationSite(Block block) {
        return block instanceof TrackedBlock trackedBlock ? trackedBlock.site : null;
    }

    private static String allocationSite() {
        StringBuilder site = new StringBuilder();
        StackWalker.getInstance().forEach(frame -> {
            String type = frame.getClassName();
            if (!type.startsWith("dev.compute.memory.") || type.contains("Test")) {
                site.append("\tat ").append(frame.toStackTraceElement()).append('\n');
            }
        });
        return site.toString();
    }

    @Override
    public void deallocate(Block block, CompletableFuture<?> inFlight) {
        if (block instanceof TrackedBlock trackedBlock) {
            tracked.remove(trackedBlock);
            upstream.deallocate(trackedBlock.block, inFlight);
        } else {
            upstream.deallocate(block, inFlight);
        }
    }

    @Override
    public long trim(long keepBytes) {
        return upstream.trim(keepBytes);
    }

    @Override
    public void collectStatistics(MemoryStatistics.Builder into) {
        upstream.collectStatistics(into);
    }

    /** The upstream's segments, with the allocation site of each tracked live block filled in. */
    @Override
    public List<MemorySnapshot.Segment> segments() {
        List<MemorySnapshot.Segment> segments = upstream.segments();
        if (tracked.isEmpty()) {
            return segments;
        }
        Map<String, String> siteByAddress = new HashMap<>();
        for (TrackedBlock trackedBlock : tracked) {
            if (trackedBlock.site != null) {
                siteByAddress.put(trackedBlock.segment().address() + ":" + trackedBlock.offset(), trackedBlock.site);
            }
        }
        List<MemorySnapshot.Segment> out = new ArrayList<>(segments.size());
        for (MemorySnapshot.Segment segment : segments) {
            List<MemorySnapshot.Block> blocks = new ArrayList<>(segment.blocks().size());
            for (MemorySnapshot.Block b : segment.blocks()) {
                String site = b.state() == MemorySnapshot.BlockState.LIVE ? siteByAddress.get(segment.address() + ":" + b.offset()) : null;
                blocks.add(site == null ? b : new MemorySnapshot.Block(b.offset(), b.sizeBytes(), b.state(), b.requestedBytes(), site));
            }
            out.add(new MemorySnapshot.Segment(segment.address(), segment.sizeBytes(), segment.expandable(), blocks));
        }
        return out;
    }

    @Override
    public void close() {
        tracked.clear();
        upstream.close();
    }
}
