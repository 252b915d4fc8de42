package dev.compute.memory;

import dev.compute.memory.resource.Block;
import java.lang.ref.Cleaner;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicLong;
import org.jspecify.annotations.Nullable;

/**
 * Watches tracked buffers with a {@link Cleaner}: a buffer that becomes unreachable without {@code close()}
 * is reported in the log (with its allocation site at {@code paranoid}) and its memory goes back to the pool,
 * once the views and accesses still open on it have ended (a view does not keep its buffer reachable, so a
 * dropped buffer may still be read through one: its memory waits for the view's thread to let go).
 */
final class LeakDetector {

    private static final System.Logger LOG = System.getLogger(UnifiedMemoryManager.class.getName());
    private static final Cleaner CLEANER = Cleaner.create(Thread.ofPlatform().daemon().name("compute-leak-detector").factory());

    private final PooledMemoryManager manager;
    private final AtomicLong leaksReported = new AtomicLong();

    LeakDetector(PooledMemoryManager manager) {
        this.manager = manager;
    }

    long leaksReported() {
        return leaksReported.get();
    }

    Tracker tracker(MemoryLocation location, long byteSize, Block block, @Nullable String site) {
        return new Tracker(this, location, byteSize, block, site);
    }

    /** Starts watching {@code buffer}, which was made with {@code tracker}. */
    void watch(UnifiedBuffer buffer, Tracker tracker) {
        tracker.cleanable = CLEANER.register(buffer, tracker);
    }

    /**
     * What the cleaner needs once the buffer is gone; it must not reach the buffer itself. The buffer tells it
     * of a mirror made later, and of its close.
     */
    static final class Tracker implements Runnable {
        private final LeakDetector detector;
        private final MemoryLocation location;
        private final long byteSize;
        private final Block block;
        private final @Nullable String site;
        private volatile @Nullable Block mirror;
        private volatile @Nullable BufferScopes scopes;
        private volatile boolean closed;
        private Cleaner.@Nullable Cleanable cleanable;

        private Tracker(LeakDetector detector, MemoryLocation location, long byteSize, Block block, @Nullable String site) {
            this.detector = detector;
            this.location = location;
            this.byteSize = byteSize;
            this.block = block;
            this.site = site;
        }

        void mirror(Block mirror) {
            this.mirror = mirror;
        }

        void scopes(BufferScopes scopes) {
            this.scopes = scopes;
        }

        void closed() {
            closed = true;
            Cleaner.Cleanable c = cleanable;
            if (c != null) {
                c.clean();
            }
        }

        @Override
        public void run() {
            if (closed || detector.manager.isClosed()) {
                return;
            }
            LOG.log(System.Logger.Level.ERROR, "LEAK: a UnifiedBuffer of " + byteSize + " bytes at " + location
                    + " was garbage-collected without close(); its memory goes back to the pool now. "
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
            } finally {
                detector.leaksReported.incrementAndGet();
            }
        }
    }
}
