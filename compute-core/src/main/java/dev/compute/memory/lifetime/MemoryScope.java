package dev.compute.memory.lifetime;

import dev.compute.memory.AccessMode;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import org.jspecify.annotations.Nullable;

/**
 * One way in to a buffer's bytes: a host view or an access. While it is open, its buffer's memory is not given
 * back, whatever else happens to the buffer; segments handed out through it live in its {@link Arena}, so they
 * stop working (with an {@link IllegalStateException}) the moment it ends, and never outlive the memory.
 *
 * <p><b>Who may end it.</b> A confined scope ({@code owner} non-null) binds its segments to a confined arena,
 * which only its owner thread can close: that is what makes it cheap (no handshake with other threads) and what
 * makes it safe (no other thread can be inside one of its segments). When another thread must end it (the buffer
 * was closed elsewhere, collected, or the manager is closing), the scope is handed to its owner, which ends it on
 * its next call into the manager; a scope whose owner has died is simply dropped, since nobody can use its
 * segments any more. A shared scope ({@code owner} null) may be ended by any thread; closing its arena
 * handshakes every thread, and fails while a native call still holds one of its segments.
 */
public final class MemoryScope {

    enum Kind {
        /** {@code hostView()}: one per buffer and thread (its slices' views included), open until the buffer closes. */
        VIEW,
        /** {@code hostAccess}/{@code deviceAccess}: open until the access ends. */
        ACCESS
    }

    final Kind kind;
    /** The owner's list of open scopes; null when shared. */
    final ScopeRegistry.@Nullable ThreadScopes list;
    final BufferScopes buffer;
    private final ScopeRegistry registry;
    private @Nullable Arena arena;
    private boolean ended;
    /** A closed buffer's access its live owner has not ended: the registry watches for the owner's end; guarded by this. */
    private boolean ownerWatched;
    /** Links in the owner's list of open scopes, guarded by that list. */
    @Nullable MemoryScope previous;
    @Nullable MemoryScope next;
    /**
     * The view scope ({@link ViewRegions.Region}) a confined view was taken in, null outside any: a view taken in a
     * region belongs to it, so a view of the same buffer taken outside it (or in another) is another scope. Written
     * by the owner thread under the root's monitor, and read by it or under that monitor.
     */
    ViewRegions.@Nullable Region region;
    /** A writing host access's mode (its end marks the host copy newer), null for any other scope; set before it joins its buffer's list. */
    @Nullable AccessMode hostWrite;
    /** Links in its buffer's list of open scopes ({@link BufferScopes}), guarded by that list. */
    @Nullable MemoryScope bufferPrevious;
    @Nullable MemoryScope bufferNext;
    /**
     * A device access's, where the scope ends without the access being ended (its thread died with it open, its buffer
     * was collected): records the work queued through its handle before the memory may go back; guarded by this.
     */
    private @Nullable UnendedAccess unendedAccess;

    /** What a device access leaves to its scope, should the scope end without it. */
    interface UnendedAccess {
        /** Before the scope ends: the work queued through the access's handle is recorded on its buffer. */
        void record();

        /** Once the scope has ended: the buffer's memory that only views may hold now need not wait for them. */
        void ended();
    }

    MemoryScope(Kind kind, ScopeRegistry.@Nullable ThreadScopes list, BufferScopes buffer, ScopeRegistry registry) {
        this.kind = kind;
        this.list = list;
        this.buffer = buffer;
        this.registry = registry;
    }

    ScopeRegistry registry() {
        return registry;
    }

    /** The thread whose segments these are; null when shared. */
    public @Nullable Thread owner() {
        return list == null ? null : list.owner;
    }

    public boolean shared() {
        return list == null;
    }

    /**
     * True for a view taken in a view scope ({@link ViewRegions.Region}) of another thread that is alive: that scope's
     * close ends it. The region was written under the root's monitor, which a close takes before it ends views.
     */
    boolean inViewScopeOfAnotherThread() {
        return kind == Kind.VIEW && region != null && list != null && list.owner != Thread.currentThread() && list.owner.isAlive();
    }

    /** True for a confined scope whose thread has ended: nobody can reach its segments. */
    boolean ownerHasEnded() {
        return list != null && !list.owner.isAlive();
    }

    public synchronized boolean isOpen() {
        return !ended;
    }

    /** {@code memory} as a segment that works only while this scope is open (and, when confined, only on its owner). */
    public synchronized MemorySegment bind(MemorySegment memory) {
        return memory.reinterpret(arena(), null);
    }

    /** {@code byteSize} bytes at {@code address} (memory a buffer's block holds), bound as {@link #bind(MemorySegment)} binds. */
    synchronized MemorySegment bind(long address, long byteSize) {
        return MemorySegment.ofAddress(address).reinterpret(byteSize, arena(), null);
    }

    /** Whether {@code segment} is one of this scope's: bound to its arena. */
    synchronized boolean binds(MemorySegment segment) {
        return arena != null && arena.scope().equals(segment.scope());
    }

    /** Under this monitor: the arena of this scope's segments, made on first need, on the owner only. */
    private Arena arena() {
        if (ended) {
            throw new IllegalStateException("this access has ended");
        }
        if (list != null && list.owner != Thread.currentThread()) {
            throw new WrongThreadException("this access belongs to thread '" + nameOf(list.owner)
                    + "'; its memory can be reached only there (take a shared access for several threads)");
        }
        Arena bound = arena;
        if (bound == null) {
            bound = list == null ? Arena.ofShared() : Arena.ofConfined();
            arena = bound;
        }
        return bound;
    }

    /**
     * Ends the scope now: its segments stop working and its buffer may give its memory back. The caller is the
     * owner, or the scope is shared. Throws {@link IllegalStateException} when a native call still holds one of a
     * shared scope's segments; the scope then stays open.
     */
    public void end() {
        IllegalStateException inUse = endUnlessInUse();
        if (inUse != null) {
            throw new IllegalStateException("the memory of this shared access is still in use by a native call; "
                    + "end the access once the call has returned", inUse);
        }
    }

    /**
     * Ends the scope as {@link #end()} does, but returns the arena's refusal, the scope left open, where a native call
     * still holds one of a shared scope's segments; null once ended. What it throws is the release's failure (a free
     * the memory resource refused), which must not be taken for a native call's hold: the scope has ended then.
     */
    @Nullable IllegalStateException endUnlessInUse() {
        UnendedAccess unended = recordUnendedAccess();
        boolean watched;
        synchronized (this) {
            if (ended) {
                return null;
            }
            if (arena != null) {
                try {
                    arena.close();
                } catch (IllegalStateException inUse) {
                    return inUse;
                }
            }
            ended = true;
            watched = ownerWatched;
            ownerWatched = false;
        }
        over(watched, unended);
        return null;
    }

    /** The scope has ended: out of the registry and its buffer's list, and, for an access ended without it, what follows. */
    private void over(boolean watched, @Nullable UnendedAccess unended) {
        registry.removed(this, watched);
        buffer.ended(this);
        if (unended != null) {
            unended.ended();
        }
    }

    /** For a device access: what records its device work should the scope end without the access ending it. */
    synchronized void onEndWithoutTheAccess(UnendedAccess access) {
        unendedAccess = access;
    }

    /** The access ends as it should, recording its own device work: nothing is left to record. */
    synchronized void accessEnded() {
        unendedAccess = null;
    }

    /** Records the work of a device access this scope ends without it; returns that access, null where there is none. */
    private @Nullable UnendedAccess recordUnendedAccess() {
        UnendedAccess unended;
        synchronized (this) {
            unended = unendedAccess;
            unendedAccess = null;
        }
        if (unended != null) {
            unended.record();
        }
        return unended;
    }

    /** Ends the scope if the calling thread may, else hands it to its owner to end; drops it if the owner has died. */
    void endOrHandOver() {
        Thread current = Thread.currentThread();
        Thread owner = owner();
        if (owner == current) {
            end();
        } else if (owner == null) {
            if (endUnlessInUse() != null) { // a native call holds it
                registry.retryLater(this);
            }
        } else if (!owner.isAlive()) {
            abandon();
        } else {
            registry.handToOwner(this);
        }
    }

    /** Marks this open confined scope as one whose owner's end the registry watches for; false when ended or already so. */
    synchronized boolean watchOwner() {
        if (ended || ownerWatched || list == null) {
            return false;
        }
        ownerWatched = true;
        return true;
    }

    /** The owner has died: no thread can reach the confined segments, so the scope is over without closing its arena. */
    void abandon() {
        UnendedAccess unended = recordUnendedAccess();
        boolean watched;
        synchronized (this) {
            if (ended) {
                return;
            }
            ended = true;
            watched = ownerWatched;
            ownerWatched = false;
        }
        over(watched, unended);
    }

    /** A thread as messages name it: by its name, or, unnamed (as virtual threads are by default), by its id. */
    static String nameOf(Thread thread) {
        String name = thread.getName();
        return !name.isEmpty() ? name : (thread.isVirtual() ? "virtual thread #" : "thread #") + thread.threadId();
    }

    @Override
    public String toString() {
        return kind + (list == null ? " (shared)" : " of thread '" + nameOf(list.owner) + "'");
    }
}
