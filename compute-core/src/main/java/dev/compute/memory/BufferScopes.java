package dev.compute.memory;

import java.util.ArrayList;
import java.util.List;
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

    /** The calling thread's open view scope, if it has one. */
    synchronized @Nullable MemoryScope viewOf(Thread thread) {
        for (MemoryScope scope : open) {
            if (scope.kind == MemoryScope.Kind.VIEW && scope.owner == thread) {
                return scope;
            }
        }
        return null;
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
     * The buffer is gone (closed, or collected): ends the scopes the calling thread may end, hands the others to
     * their owners, and runs {@code release} once none is open, at once if none is.
     */
    void closeAll(Runnable release) {
        List<MemoryScope> snapshot;
        synchronized (this) {
            if (open.isEmpty()) {
                snapshot = List.of();
            } else {
                whenEmpty = release;
                snapshot = List.copyOf(open);
            }
        }
        if (snapshot.isEmpty()) {
            release.run();
            return;
        }
        for (MemoryScope scope : snapshot) {
            scope.endOrHandOver();
        }
    }
}
