package dev.compute.memory.lifetime;

import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.MemoryEventListener;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemorySnapshot;
import dev.compute.memory.internal.LibraryThreads;
import dev.compute.memory.internal.ManagerLog;
import dev.compute.memory.internal.UserCode;
import dev.compute.memory.resource.Block;
import java.lang.ref.Cleaner;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;

/**
 * Leak detection, in one place: which buffers are tracked (none at {@code disabled}, one in
 * {@value LeakDetectionLevel#SIMPLE_SAMPLING_INTERVAL} at {@code simple}, without the site, since taking a stack
 * trace is the expensive part; every one with its allocation site at {@code paranoid}), the {@link Cleaner} that
 * finds a tracked buffer's handle garbage-collected without {@code close()}, the report (a {@code LEAK} log line and
 * the listener's event) and the sites that snapshots and the close report show. An untracked buffer, the common case,
 * costs nothing here but the level check.
 *
 * <p>As Netty's {@code ResourceLeakDetector}, the log has each site's trace once: a service leaking in a loop would
 * otherwise write a trace per leak. Later leaks of a site (of the unrecorded sites, at {@code simple}) get a line of
 * their own, without the trace, at the site's 2nd, 4th, 8th ... leak; the count and the listener hear of every one.
 *
 * <p>The cleaner watches the public handle, which only the application references; what it needs once the handle is
 * gone is the buffer's core ({@link BufferCore}), which never refers to its handle. A found leak's core is closed as
 * the handle would have been: its memory goes back to the pool once the views and accesses still open on it have
 * ended (a view does not keep its buffer reachable, so a dropped buffer may still be read through one) and device
 * work queued on it is done.
 */
public final class LeakDetector {

    private static final System.Logger LOG = ManagerLog.logger();
    /** How many sites {@link #leaksBySite} keeps: beyond, a new site's every leak is logged in full, as before. */
    private static final int MAX_SITES = 1024;
    private static final Cleaner CLEANER = Cleaner.create(LibraryThreads.daemons("compute-leak-detector", false));
    /**
     * Where a request that waited for memory was asked for, while another thread serves it: the serving thread's own
     * frames (the waiters' executor) would say nothing of who asked, in allocation sites and in recorded call sites.
     */
    private static final ScopedValue<AskedAt> ASKED_AT = ScopedValue.newInstance();

    /**
     * The frames of a request served later, and how deep in the application's code its serving began: an
     * out-of-memory handler called while it is tried, deeper, allocates for itself, at its own site.
     */
    private record AskedAt(List<StackTraceElement> frames, int userCodeDepth) {}

    private final BooleanSupplier managerClosed;
    private final LeakDetectionLevel level;
    private final MemoryEventListener events;
    private final Set<Watch> live = ConcurrentHashMap.newKeySet();
    private final AtomicLong leaksReported = new AtomicLong();
    /** Leaks so far per site logged in full (the site, or where none was recorded, the kind of buffer): {@link #logged}. */
    private final Map<String, AtomicLong> leaksBySite = new ConcurrentHashMap<>();

    public LeakDetector(BooleanSupplier managerClosed, LeakDetectionLevel level, MemoryEventListener events) {
        this.managerClosed = managerClosed;
        this.level = level;
        this.events = events;
    }

    public long leaksReported() {
        return leaksReported.get();
    }

    /**
     * Watches {@code handle}, the public buffer over {@code core}, from now on, if this one is tracked: the cleaner
     * watches the handle, so the JIT can keep a handle allocated and closed in one method off the heap where it is
     * not tracked.
     */
    public void track(Object handle, BufferCore core) {
        if (level == LeakDetectionLevel.SIMPLE) {
            if (ThreadLocalRandom.current().nextInt(LeakDetectionLevel.SIMPLE_SAMPLING_INTERVAL) == 0) {
                watch(handle, core, null);
            }
        } else if (level == LeakDetectionLevel.PARANOID) {
            watch(handle, core, allocationSite());
        }
    }

    /** The site to record for a mapped file's buffer: where it was mapped at {@code paranoid}, else none. */
    public @Nullable String mappingSite() {
        return level == LeakDetectionLevel.PARANOID ? allocationSite() : null;
    }

    /**
     * Watches a buffer over a mapped file: every one, at {@code simple} as at {@code paranoid} (none at
     * {@code disabled}). Mapping costs a system call, beside which tracking is cheap, and a leaked mapping holds one
     * of the few a process may have until it is found.
     */
    public void trackMapping(Object handle, BufferCore core, @Nullable String site) {
        if (level != LeakDetectionLevel.DISABLED) {
            watch(handle, core, site);
        }
    }

    private void watch(Object handle, BufferCore core, @Nullable String site) {
        Watch watch = new Watch(this, core, site);
        live.add(watch);
        core.leakWatch = watch;
        watch.cleanable = CLEANER.register(handle, watch);
    }

    private static String allocationSite() {
        StringBuilder site = new StringBuilder();
        for (StackTraceElement frame : callerFrames(Integer.MAX_VALUE)) {
            site.append("\tat ").append(frame).append('\n');
        }
        return site.toString();
    }

    /**
     * The frames from the caller of the manager on (the library's own left out), at most {@code maxFrames}: the
     * current thread's, or, while a request that waited for memory is served ({@link #servedAsAskedAt}), those of
     * the thread that asked for it, as they were then.
     */
    public static List<StackTraceElement> callerFrames(int maxFrames) {
        if (ASKED_AT.isBound() && ASKED_AT.get().userCodeDepth() == UserCode.depth()) {
            List<StackTraceElement> asked = ASKED_AT.get().frames();
            return asked.size() <= maxFrames ? asked : asked.subList(0, maxFrames);
        }
        return StackWalker.getInstance().walk(frames -> frames.filter(frame -> !isLibraryFrame(frame.getClassName()))
                .limit(maxFrames).map(StackWalker.StackFrame::toStackTraceElement).toList());
    }

    /** Runs {@code allocation} of a request served later as if at {@code askedAt}, its {@link #callerFrames} when it asked. */
    public static <T> T servedAsAskedAt(List<StackTraceElement> askedAt, Supplier<T> allocation) {
        return ScopedValue.where(ASKED_AT, new AskedAt(askedAt, UserCode.depth())).call(allocation::get);
    }

    /** A frame of the library's own code, which no allocation site shows; the core's own tests count as its callers. */
    public static boolean isLibraryFrame(String className) {
        return className.startsWith("dev.compute.memory.") && !className.contains("Test");
    }

    /** {@code segments} with the allocation site of each tracked live block filled in. */
    public List<MemorySnapshot.Segment> withSites(MemoryLocation location, List<MemorySnapshot.Segment> segments) {
        Map<String, String> siteByPlace = new HashMap<>();
        for (Watch watch : live) {
            if (watch.site != null && watch.core.location == location) {
                siteByPlace.put(place(watch.block.segment().address(), watch.block.offset()), watch.site);
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

    /**
     * Logs a leak of {@code core} allocated at {@code site}: in full at the site's first leak, then a line without the
     * trace at each power of two, so that a site leaking in a loop writes a few lines, not one per leak.
     */
    private void logged(BufferCore core, @Nullable String site) {
        String key = (core.mappedFrom != null ? "mapped\n" : "") + (site != null ? site : "");
        AtomicLong seen = leaksBySite.size() < MAX_SITES ? leaksBySite.computeIfAbsent(key, any -> new AtomicLong()) : leaksBySite.get(key);
        long count = seen == null ? 1 : seen.incrementAndGet();
        if (count == 1) {
            LOG.log(System.Logger.Level.ERROR, "LEAK: a UnifiedBuffer of " + core.byteSize + " bytes at " + core.location
                    + " was garbage-collected without close(); " + (core.mappedFrom != null
                    ? "it was " + core.mappedFrom + ", and is unmapped now. "
                    : "its memory goes back to the pool now, or as the views and accesses still open on it end. ")
                    + (site != null ? "It was allocated at:\n" + site
                    : "Set compute.memory.leak-detection=paranoid to see where leaked buffers are allocated."));
        } else if (Long.bitCount(count) == 1) {
            LOG.log(System.Logger.Level.ERROR, "LEAK: " + count + " UnifiedBuffers " + (core.mappedFrom != null ? "over mapped files " : "")
                    + (site != null ? "allocated at the site logged in full with the first of them (its first frame: "
                    + site.lines().map(String::strip).filter(line -> line.startsWith("at ")).findFirst().orElse("at ?").substring("at ".length()) + ")"
                    : "of sites not recorded (leak-detection simple)")
                    + " have been garbage-collected without close() so far; the next line for them comes at " + 2 * count
                    + ", and leaksDetected() counts every one.");
        }
    }

    private static String place(long address, long offset) {
        return address + ":" + offset;
    }

    /**
     * What the cleaner runs once a tracked handle is gone: it holds the core (never the handle), the block as it was
     * allocated (a compaction moves a block in place, so this stays the buffer's) and the site.
     */
    static final class Watch implements Runnable {
        private final LeakDetector detector;
        private final BufferCore core;
        private final Block block;
        private final @Nullable String site;
        private volatile boolean closed;
        private Cleaner.@Nullable Cleanable cleanable;

        private Watch(LeakDetector detector, BufferCore core, @Nullable String site) {
            this.detector = detector;
            this.core = core;
            this.block = core.ownBlock();
            this.site = site;
        }

        /** The buffer was closed: nothing to report. */
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
            if (!closed && detector.managerClosed.getAsBoolean()) {
                // the manager's close reports the buffer as still open and frees it: its site stays for that report
                return;
            }
            detector.live.remove(this);
            if (closed) {
                return;
            }
            detector.logged(core, site);
            // Counted last: whoever sees the count has the LEAK line logged and the memory back in the pool (or, when
            // a view is still open, waiting for it).
            try {
                try {
                    core.closeLeaked();
                } catch (RuntimeException | Error e) {
                    // its free was refused (the memory resource threw): the cleaner would drop this unseen, and the
                    // leak must still be told as leaksDetected() counts it
                    LOG.log(System.Logger.Level.WARNING, "giving a leaked buffer's memory back failed (the memory resource"
                            + " refused the free)", e);
                }
                detector.events.leakDetected(core.location, core.byteSize, site);
            } finally {
                detector.leaksReported.incrementAndGet();
            }
        }
    }
}
