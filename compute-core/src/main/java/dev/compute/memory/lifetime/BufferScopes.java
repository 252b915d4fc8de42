package dev.compute.memory.lifetime;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.jspecify.annotations.Nullable;

/**
 * The open views and accesses of one buffer. Made on the buffer's first view or access and shared with its leak
 * tracker, it never refers to the buffer itself: a registry of open scopes must not keep a dropped buffer from
 * being found out as a leak. Once the buffer is closed (or collected), {@link #closeAll} ends what it can and the
 * last scope to end runs the release it was given.
 */
final class BufferScopes {

    private final List<MemoryScope> open = new ArrayList<>(2);
    private @Nullable Runnable whenEmpty;

    synchronized void add(MemoryScope scope) {
        open.add(scope);
    }

    synchronized boolean isEmpty() {
        return open.isEmpty();
    }

    /** The calling thread's open view scope of the buffer or slice {@code lineage} names (null: the buffer), if any. */
    synchronized @Nullable MemoryScope viewOf(Thread thread, Object @Nullable [] lineage) {
        for (MemoryScope scope : open) {
            if (scope.kind == MemoryScope.Kind.VIEW && scope.owner() == thread && scope.lineage == lineage) {
                return scope;
            }
        }
        return null;
    }

    /** The buffer's (or the slice {@code lineage} names) shared view scope, open to every thread, if any. */
    synchronized @Nullable MemoryScope sharedViewOf(Object @Nullable [] lineage) {
        for (MemoryScope scope : open) {
            if (scope.kind == MemoryScope.Kind.VIEW && scope.shared() && scope.lineage == lineage) {
                return scope;
            }
        }
        return null;
    }

    /** The threads holding confined views or accesses open, by name, for a warning about memory that waits for them. */
    synchronized List<String> holders() {
        List<String> names = new ArrayList<>();
        for (MemoryScope scope : open) {
            Thread owner = scope.owner();
            String name = owner == null ? "a shared " + scope.kind.name().toLowerCase(Locale.ROOT) : "'" + owner.getName() + "'";
            if (!names.contains(name)) {
                names.add(name);
            }
        }
        return names;
    }

    /** A slice was closed: ends the views taken of it or of slices cut from it (or hands them to their owners). */
    void endViewsOf(Object slice) {
        MemoryScope[] snapshot;
        synchronized (this) {
            snapshot = open.toArray(MemoryScope[]::new);
        }
        for (MemoryScope scope : snapshot) {
            if (scope.kind == MemoryScope.Kind.VIEW && scope.isOf(slice)) {
                scope.endOrHandOver();
            }
        }
    }

    void ended(MemoryScope scope) {
        Runnable release = null;
        synchronized (this) {
            open.remove(scope);
            if (open.isEmpty()) {
                release = whenEmpty;
                whenEmpty = null;
            }
        }
        if (release != null) {
            release.run();
        }
    }

    /**
     * The buffer was closed: ends its views (those the calling thread may end; the others are handed to their
     * owners) and runs {@code release} once no view or access is open, at once if none is. Accesses stay open
     * until their holders end them.
     */
    void closeViews(Runnable release) {
        endWhenEmpty(release, Ending.VIEWS);
    }

    /** The buffer was collected: as {@link #closeViews}, for its accesses too (nobody can end them any more). */
    void closeAll(Runnable release) {
        endWhenEmpty(release, Ending.VIEWS_AND_ACCESSES);
    }

    /** What a close ends at once: the views (accesses stay until their holders end them), or, for a leak, everything. */
    private enum Ending { VIEWS, VIEWS_AND_ACCESSES }

    private void endWhenEmpty(Runnable release, Ending ending) {
        MemoryScope[] toEnd;
        synchronized (this) {
            toEnd = open.toArray(MemoryScope[]::new);
            if (toEnd.length > 0) {
                whenEmpty = release;
            }
        }
        if (toEnd.length == 0) {
            release.run();
            return;
        }
        for (MemoryScope scope : toEnd) {
            if (ending == Ending.VIEWS_AND_ACCESSES || scope.kind == MemoryScope.Kind.VIEW || scope.ownerHasEnded()) {
                scope.endOrHandOver();
            }
        }
    }
}
