package dev.compute.memory.resource;

import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.MemorySnapshot;
import dev.compute.memory.MemoryStatistics;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ThreadLocalRandom;
import org.jspecify.annotations.Nullable;

/**
 * Chooses which allocations are tracked for leaks and remembers, for those, where they were allocated:
 * none at {@code disabled}, one in {@value LeakDetectionLevel#SIMPLE_SAMPLING_INTERVAL} at {@code simple}
 * (without the site: taking a stack trace is the expensive part), every one with its stack trace at
 * {@code paranoid}. The manager watches tracked buffers with a {@link java.lang.ref.Cleaner}; this resource
 * adds the sites to snapshots. Thread-safe.
 */
public final class LeakTrackingResource implements MemoryResource {

    /** Stands for "tracked, site not recorded" in the map (which holds no nulls). */
    private static final String NO_SITE = "";

    private final MemoryResource upstream;
    private final LeakDetectionLevel level;
    private final Map<Block, String> tracked = new ConcurrentHashMap<>();

    public LeakTrackingResource(MemoryResource upstream, LeakDetectionLevel level) {
        this.upstream = upstream;
        this.level = level;
    }

    @Override
    public Block allocate(long bytes) {
        Block block = upstream.allocate(bytes);
        switch (level) {
            case DISABLED -> { }
            case SIMPLE -> {
                if (ThreadLocalRandom.current().nextInt(LeakDetectionLevel.SIMPLE_SAMPLING_INTERVAL) == 0) {
                    tracked.put(block, NO_SITE);
                }
            }
            case PARANOID -> tracked.put(block, allocationSite());
        }
        return block;
    }

    /** True when the buffer made from this block should be watched for a leak. */
    public boolean isTracked(Block block) {
        return tracked.containsKey(block);
    }

    /** Where the block was allocated, when recorded. */
    public @Nullable String allocationSite(Block block) {
        String site = tracked.get(block);
        return site == null || site.isEmpty() ? null : site;
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
        if (level != LeakDetectionLevel.DISABLED) {
            tracked.remove(block);
        }
        upstream.deallocate(block, inFlight);
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
        Map<String, String> siteByAddress = new ConcurrentHashMap<>();
        tracked.forEach((block, site) -> {
            if (!site.isEmpty()) {
                siteByAddress.put(block.segment().address() + ":" + block.offset(), site);
            }
        });
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
