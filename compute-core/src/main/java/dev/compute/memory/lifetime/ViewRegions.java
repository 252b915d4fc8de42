package dev.compute.memory.lifetime;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.jspecify.annotations.Nullable;

/**
 * The stretches of a thread's work its views end with: a web request, a task, or any {@code try} block of the
 * application's ({@link dev.compute.memory.ViewScope}). A view taken inside one is confined to the thread (cheap, no
 * handshake) and ends, with every other view taken in it, when the region closes, whoever closes its buffer meanwhile:
 * so a closed buffer's memory never waits longer than the work that viewed it. Regions nest; a view belongs to the
 * innermost. One thread's regions live in a thread-local stack, touched only by that thread.
 */
public final class ViewRegions {

    /** One open region: the views taken in it, on its thread. */
    public static final class Region {
        private final @Nullable Region outer;
        private final Thread owner;
        /** The fewest views kept before ended ones are dropped. */
        private static final int PRUNE_AT_LEAST = 64;
        /** The views taken in this region and maybe still open: a long-lived region drops ended ones as it grows. */
        private final List<MemoryScope> views = new ArrayList<>();
        private int pruneAt = PRUNE_AT_LEAST;
        private boolean closed;

        private Region(@Nullable Region outer, Thread owner) {
            this.outer = outer;
            this.owner = owner;
        }

        /** How many views the region still keeps (some may have ended since the last drop). */
        int viewsKept() {
            return views.size();
        }

        void add(MemoryScope view) {
            if (views.size() >= pruneAt) { // views ended meanwhile (their buffers closed) are dropped, amortized
                views.removeIf(ended -> !ended.isOpen());
                pruneAt = Math.max(PRUNE_AT_LEAST, 2 * views.size());
            }
            views.add(view);
        }

        /**
         * Ends every view taken in this region (and in regions opened inside it and left open), then makes the outer
         * region current again. Only the thread that opened it may close it; closing twice is harmless.
         */
        public void close() {
            if (Thread.currentThread() != owner) {
                throw new WrongThreadException("a view scope belongs to thread '" + MemoryScope.nameOf(owner) + "', which opened it, and only it may close it");
            }
            if (closed) {
                return;
            }
            // a failed end (a free the memory resource refused) stops no other end, nor leaves the thread in the region
            Throwable failure = null;
            Region top = CURRENT.get();
            while (top != null && top != this) { // inner regions left open end with this one
                failure = top.endViews(failure);
                top = top.outer;
            }
            failure = endViews(failure);
            CURRENT.set(outer);
            if (failure instanceof RuntimeException unchecked) {
                throw unchecked;
            }
            if (failure instanceof Error error) {
                throw error;
            }
        }

        /** Ends the views; returns {@code failure} or, if null, the first failure of an end here. */
        private @Nullable Throwable endViews(@Nullable Throwable failure) {
            closed = true;
            Set<ScopeRegistry> registries = new HashSet<>();
            for (MemoryScope view : views) {
                try {
                    view.end();
                } catch (RuntimeException | Error e) {
                    failure = failure == null ? e : failure;
                }
                registries.add(view.registry());
            }
            views.clear();
            for (ScopeRegistry registry : registries) {
                try {
                    registry.endHandedOver(); // what other threads handed this one among them: ended now, no longer waiting
                } catch (RuntimeException | Error e) {
                    failure = failure == null ? e : failure;
                }
            }
            return failure;
        }
    }

    private static final ThreadLocal<@Nullable Region> CURRENT = new ThreadLocal<>();
    /** Set by the first region opened in the JVM: until then no thread is in one, and a view need not look. */
    private static volatile boolean anyOpened;

    private ViewRegions() {}

    /** Opens a region on the calling thread, inside the one open there, if any. */
    public static Region open() {
        if (!anyOpened) {
            anyOpened = true;
        }
        Region region = new Region(CURRENT.get(), Thread.currentThread());
        CURRENT.set(region);
        return region;
    }

    /** The calling thread's innermost open region, or null. */
    static @Nullable Region current() {
        return anyOpened ? CURRENT.get() : null;
    }
}
