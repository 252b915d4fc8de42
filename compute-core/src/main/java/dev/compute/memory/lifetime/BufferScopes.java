package dev.compute.memory.lifetime;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import org.jspecify.annotations.Nullable;

/**
 * The open views and accesses of one buffer. Made on the buffer's first view or access and shared with its leak
 * tracker, it never refers to the buffer itself: a registry of open scopes must not keep a dropped buffer from
 * being found out as a leak. Once the buffer is closed (or collected), {@link #closeAll} ends what it can and the
 * last scope to end runs the release it was given.
 *
 * <p>The open scopes are a list through their own links ({@link MemoryScope#bufferNext}), guarded by this object's
 * monitor: a buffer has one or two at a time, and a view taken and dropped is the commonest way to reach bytes, so
 * keeping them costs no list or array of its own.
 */
final class BufferScopes {

    private @Nullable MemoryScope first;
    private @Nullable Runnable whenEmpty;
    /** Device work a copy left queued on one of these views' or accesses' memory (its wait timed out); null once done. */
    private @Nullable CompletableFuture<?> leftQueuedInto;

    /** Open writing host accesses: read without the lock, so that device work on a buffer with none pays one read. */
    private volatile int hostWrites;

    synchronized void add(MemoryScope scope) {
        if (scope.hostWrite != null) {
            hostWrites++;
        }
        scope.bufferNext = first;
        if (first != null) {
            first.bufferPrevious = scope;
        }
        first = scope;
    }

    /**
     * Refuses device work that writes the buffer ({@code what}) while a writing host access to it is open: that
     * access's end would mark the host copy newer, and the next sync would overwrite what the device wrote.
     */
    void refuseDeviceWriteUnderHostWrite(Object buffer, String what) {
        if (hostWrites == 0) {
            return;
        }
        synchronized (this) {
            for (MemoryScope scope = first; scope != null; scope = scope.bufferNext) {
                if (scope.hostWrite != null && !scope.ownerHasEnded()) { // a dead thread's access can end nothing any more
                    Thread owner = scope.owner();
                    throw new IllegalStateException(what + " " + buffer + " while a " + scope.hostWrite + " host access to it is open ("
                            + (owner == null ? "shared" : "on thread '" + MemoryScope.nameOf(owner) + "'")
                            + "): its end would mark the host copy newer and the device's result would be overwritten; end the host access first");
                }
            }
        }
    }

    /** The buffer's memory waits for {@code work} too (see {@link ScopeRegistry#leftQueuedInto}). */
    synchronized void keepUntil(CompletableFuture<?> work) {
        leftQueuedInto = leftQueuedInto == null || leftQueuedInto.isDone() ? work : CompletableFuture.allOf(leftQueuedInto, work);
    }

    /** The work {@link #keepUntil} was given that may still be under way; null where none is. */
    synchronized @Nullable CompletableFuture<?> leftQueuedInto() {
        if (leftQueuedInto != null && leftQueuedInto.isDone()) {
            leftQueuedInto = null;
        }
        return leftQueuedInto;
    }

    synchronized boolean isEmpty() {
        return first == null;
    }

    /** Whether every open scope is confined to {@code thread}: none that another thread may end (none at all, too). */
    synchronized boolean onlyConfinedTo(Thread thread) {
        for (MemoryScope scope = first; scope != null; scope = scope.bufferNext) {
            if (scope.owner() != thread) {
                return false;
            }
        }
        return true;
    }

    /** Whether scopes are open and every one is a view: what they reach is the host copy, never a device block. */
    synchronized boolean onlyViews() {
        for (MemoryScope scope = first; scope != null; scope = scope.bufferNext) {
            if (scope.kind != MemoryScope.Kind.VIEW) {
                return false;
            }
        }
        return first != null;
    }

    /**
     * Whether scopes are open and every one is a view a thread took outside any view scope: nothing but that thread's
     * next call into the manager, or its end, ends them.
     */
    synchronized boolean onlyViewsOutsideViewScopes() {
        for (MemoryScope scope = first; scope != null; scope = scope.bufferNext) {
            if (scope.kind != MemoryScope.Kind.VIEW || scope.region != null || scope.shared()) {
                return false;
            }
        }
        return first != null;
    }

    /** Whether views taken inside a view scope that is still open hold the buffer (and its slices). */
    synchronized boolean viewsInOpenViewScopes() {
        for (MemoryScope scope = first; scope != null; scope = scope.bufferNext) {
            if (scope.kind == MemoryScope.Kind.VIEW && scope.region != null) {
                return true;
            }
        }
        return false;
    }

    /** The calling thread's open view scope of the buffer (and its slices) taken outside any view scope, if any. */
    synchronized @Nullable MemoryScope viewOf(Thread thread) {
        return viewOf(thread, null);
    }

    /**
     * The calling thread's open view scope of the buffer (and its slices) taken in {@code region} (null: outside any),
     * if any: a view belongs to the innermost view scope open when it was taken.
     */
    synchronized @Nullable MemoryScope viewOf(Thread thread, ViewRegions.@Nullable Region region) {
        for (MemoryScope scope = first; scope != null; scope = scope.bufferNext) {
            if (scope.kind == MemoryScope.Kind.VIEW && scope.owner() == thread && scope.region == region) {
                return scope;
            }
        }
        return null;
    }

    /** The buffer's shared view scope (its slices' views too), open to every thread, if any. */
    synchronized @Nullable MemoryScope sharedView() {
        for (MemoryScope scope = first; scope != null; scope = scope.bufferNext) {
            if (scope.kind == MemoryScope.Kind.VIEW && scope.shared()) {
                return scope;
            }
        }
        return null;
    }

    /** The threads holding confined views or accesses open, by name, for a warning about memory that waits for them. */
    synchronized List<String> holders() {
        List<String> names = new ArrayList<>();
        for (MemoryScope scope = first; scope != null; scope = scope.bufferNext) {
            Thread owner = scope.owner();
            String name = owner == null ? "a shared " + scope.kind.name().toLowerCase(Locale.ROOT) : "'" + MemoryScope.nameOf(owner) + "'";
            if (!names.contains(name)) {
                names.add(name);
            }
        }
        return names;
    }

    void ended(MemoryScope scope) {
        Runnable release = null;
        synchronized (this) {
            unlink(scope);
            if (first == null) {
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
     * owners, but for those in a view scope, which its close ends) and runs {@code release} once no view or access is
     * open, at once if none is. Accesses stay open until their holders end them.
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
        MemoryScope only;
        MemoryScope @Nullable [] toEnd = null;
        synchronized (this) {
            only = first;
            if (only != null) {
                whenEmpty = release;
                if (only.bufferNext != null) {
                    toEnd = snapshot();
                }
            }
        }
        if (only == null) {
            release.run();
        } else if (toEnd == null) { // the common case: one view, ended without a copy of the list
            endAsClosed(only, ending);
        } else {
            for (MemoryScope scope : toEnd) {
                endAsClosed(scope, ending);
            }
        }
    }

    private static void endAsClosed(MemoryScope scope, Ending ending) {
        if (scope.inViewScopeOfAnotherThread()) {
            // its view scope ends it, not the thread's next call: the code reading it may still be running there
            scope.registry().watchOwnerOf(scope);
        } else if (ending == Ending.VIEWS_AND_ACCESSES || scope.kind == MemoryScope.Kind.VIEW || scope.ownerHasEnded()) {
            scope.endOrHandOver();
        } else if (!scope.shared()) {
            scope.registry().watchOwnerOf(scope); // its thread may end without ending it, or calling in again
        }
    }

    /** Under this monitor: the open scopes, to end outside it (ending one changes the list). */
    private MemoryScope[] snapshot() {
        int count = 0;
        for (MemoryScope scope = first; scope != null; scope = scope.bufferNext) {
            count++;
        }
        MemoryScope[] all = new MemoryScope[count];
        int i = 0;
        for (MemoryScope scope = first; scope != null; scope = scope.bufferNext) {
            all[i++] = scope;
        }
        return all;
    }

    /** Under this monitor; a scope not in the list (ended twice) is left alone. */
    private void unlink(MemoryScope scope) {
        MemoryScope previous = scope.bufferPrevious;
        MemoryScope next = scope.bufferNext;
        if (previous != null) {
            previous.bufferNext = next;
        } else if (first == scope) {
            first = next;
        } else {
            return;
        }
        if (next != null) {
            next.bufferPrevious = previous;
        }
        scope.bufferPrevious = null;
        scope.bufferNext = null;
        if (scope.hostWrite != null) {
            hostWrites--;
        }
    }
}
