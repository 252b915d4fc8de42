package dev.compute.memory;

import dev.compute.memory.resource.Block;
import java.lang.ref.Cleaner;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicLong;
import org.jspecify.annotations.Nullable;

/**
 * Leak detection, in one place: which buffers are tracked (none at {@code disabled}, one in
 * {@value LeakDetectionLevel#SIMPLE_SAMPLING_INTERVAL} at {@code simple}, without the site, since taking a stack
 * trace is the expensive part; every one with its allocation site at {@code paranoid}), the {@link Cleaner} that
 * finds a tracked buffer garbage-collected without {@code close()}, the report (a {@code LEAK} log line and the
 * listener's event) and the sites that snapshots and the close report show. An untracked buffer, the common case,
 * costs nothing here but the level check.
 *
 * <p>A found leak's memory goes back to the pool once the views and accesses still open on it have ended (a view
 * does not keep its buffer reachable, so a dropped buffer may still be read through one: its memory waits for
 * the view's thread to let go).
 */
final class LeakDetector {

    private static final System.Logger LOG = System.getLogger(UnifiedMemoryManager.class.getName());
    private static final Cleaner CLEANER = Cleaner.create(Thread.ofPlatform().daemon().name("compute-leak-detector").factory());

    private final PooledMemoryManager manager;
    private final LeakDetectionLevel level;
    private final MemoryEventListener events;
    private final Set<Leak> live = ConcurrentHashMap.newKeySet();
    private final AtomicLong leaksReported = new AtomicLong();

    LeakDetector(PooledMemoryManager manager, LeakDetectionLevel level, MemoryEventListener events) {
        this.manager = manager;
        this.level = level;
        this.events = events;
    }

    long leaksReported() {
        return leaksReported.get();
    }

    /**
     * A tracker, watched from now on, for a new buffer over {@code block} to hold; or null when this one is not
     * tracked. The buffer is never handed to the detector: the cleaner watches the tracker, which only the buffer
     * references, so it becomes unreachable with the buffer. That keeps the buffer out of every shared structure, and
     * the JIT can then keep a buffer allocated and closed in one method off the heap, tracked or not, as it does at
     * {@code disabled}.
     */
    @Nullable Tracker track(MemoryLocation location, long byteSize, Block block) {
        return switch (level) {
            case DISABLED -> null;
            case SIMPLE -> ThreadLocalRandom.current().nextInt(LeakDetectionLevel.SIMPLE_SAMPLING_INTERVAL) == 0
                    ? watched(location, byteSize, block, null) : null;
            case PARANOID -> watched(location, byteSize, block, allocationSite());
        };
    }

    /** The site to record for a mapped file's buffer: where it was mapped at {@code paranoid}, else none. */
    @Nullable String mappingSite() {
        return level == LeakDetectionLevel.PARANOID ? allocationSite() : null;
    }

    /**
     * A tracker for a buffer over a mapped file: every one, at {@code simple} as at {@code paranoid} (none at
     * {@code disabled}). Mapping costs a system call, beside which tracking is cheap, and a leaked mapping holds one
     * of the few a process may have until it is found.
     */
    @Nullable Tracker trackMapping(MemoryLocation location, long byteSize, Block block, @Nullable String site) {
        return level == LeakDetectionLevel.DISABLED ? null : watched(location, byteSize, block, site);
    }

    private Tracker watched(MemoryLocation location, long byteSize, Block block, @Nullable String site) {
        Leak leak = new Leak(this, location, byteSize, block, site);
        Tracker tracker = new Tracker(leak);
        live.add(leak);
        leak.cleanable = CLEANER.register(tracker, leak);
        return tracker;
    }

    private static String allocationSite() {
        StringBuilder site = new StringBuilder();
        StackWalker.getInstance().forEach(frame -> {
            if (!AllocationSites.isManagerFrame(frame.getClassName())) {
                site.append("\tat ").append(frame.toStackTraceElement()).append('\n');
            }
        });
        return site.toString();
    }

    /** {@code segments} with the allocation site of each tracked live block filled in. */
    List<MemorySnapshot.Segment> withSites(MemoryLocation location, List<MemorySnapshot.Segment> segments) {
        Map<String, String> siteByPlace = new HashMap<>();
        for (Leak leak : live) {
            if (leak.site != null && leak.location == location) {
                siteByPlace.put(place(leak.block.segment().address(), leak.block.offset()), leak.site);
            }
        }
        if (siteByPlace.isEmpty()) {
            return segments;
        }
        List<MemorySnapshot.Segment> out = new ArrayList<>(segments.size());
        for (MemorySnapshot.Segment segment : segments) {
            List<MemorySnapshot.Block> blocks = new ArrayList<>(segment.blocks().size());
            for (MemorySnapshot.Block b : segment.blocks()) {
                String site = b.state() == MemorySnapshot.BlockState.LIVE ? siteByPlace.get(place(segment.address(), b.offset())) : null;
                blocks.add(site == null ? b : new MemorySnapshot.Block(b.offset(), b.sizeBytes(), b.state(), b.requestedBytes(), site));
            }
            out.add(new MemorySnapshot.Segment(segment.address(), segment.sizeBytes(), segment.expandable(), blocks));
        }
        return out;
    }

    private static String place(long address, long offset) {
        return address + ":" + offset;
    }

    /**
     * What a tracked buffer holds, and all it holds of leak detection: the object the cleaner watches. The buffer
     * tells it of a mirror made later, of its views, and of its close.
     */
    static final class Tracker {
        private final Leak leak;

        private Tracker(Leak leak) {
            this.leak = leak;
        }

        void mirror(Block mirror) {
            leak.mirror = mirror;
        }

        void scopes(BufferScopes scopes) {
            leak.scopes = scopes;
        }

        void closed() {
            leak.closed();
        }
    }

    /** What the cleaner needs once the buffer and its tracker are gone; it must reach neither. */
    private static final class Leak implements Runnable {
        private final LeakDetector detector;
        private final MemoryLocation location;
        private final long byteSize;
        private final Block block;
        private final @Nullable String site;
        private volatile @Nullable Block mirror;
        private volatile @Nullable BufferScopes scopes;
        private volatile boolean closed;
        private Cleaner.@Nullable Cleanable cleanable;

        private Leak(LeakDetector detector, MemoryLocation location, long byteSize, Block block, @Nullable String site) {
            this.detector = detector;
            this.location = location;
            this.byteSize = byteSize;
            this.block = block;
            this.site = site;
        }

        void closed() {
            closed = true;
            detector.live.remove(this);
            Cleaner.Cleanable c = cleanable;
            if (c != null) {
                c.clean();
            }
        }

        @Override
        public void run() {
            detector.live.remove(this);
            if (closed || detector.manager.isClosed()) {
                return;
            }
            LOG.log(System.Logger.Level.ERROR, "LEAK: a UnifiedBuffer of " + byteSize + " bytes at " + location
                    + " was garbage-collected without close(); " + (block instanceof MappedFile mapped
                    ? "it was " + mapped.range() + ", and is unmapped now. " : "its memory goes back to the pool now. ")
                    + (site != null ? "It was allocated at:\n" + site
                    : "Set compute.memory.leak-detection=paranoid to see where leaked buffers are allocated."));
            // Counted last: whoever sees the count has the LEAK line logged and the memory back in the pool (or, when
            // a view is still open, waiting for it).
            try {
                Block leakedMirror = mirror;
                Runnable release = () -> detector.manager.release(location, block, leakedMirror, CompletableFuture.completedFuture(null));
                BufferScopes open = scopes;
                if (open != null) {
                    open.closeAll(release);
                } else {
                    release.run();
                }
                detector.events.leakDetected(location, byteSize, site);
            } finally {
                detector.leaksReported.incrementAndGet();
            }
        }
    }
}
