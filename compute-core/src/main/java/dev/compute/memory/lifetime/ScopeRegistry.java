package dev.compute.memory.lifetime;

import dev.compute.memory.AccessMode;
import dev.compute.memory.internal.LibraryThreads;
import dev.compute.memory.internal.ManagerLog;
import java.lang.foreign.MemorySegment;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.WeakHashMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicIntegerFieldUpdater;
import java.util.Objects;
import java.util.concurrent.locks.LockSupport;
import org.jspecify.annotations.Nullable;

/**
 * Every open view and access of one manager, by owner thread, so that the manager can end them all before it
 * frees memory, and so that a thread can end the confined scopes other threads handed to it.
 *
 * <p>The cost is kept off the allocation path: a thread finds its own list through a {@link ThreadLocal}, and the
 * check for scopes handed to it is one volatile read while none are ({@link #endHandedOver()}).
 */
public final class ScopeRegistry {

    private static final System.Logger LOG = ManagerLog.logger();

    /** One thread's open confined scopes, in an intrusive list, and those others asked it to end. */
    static final class ThreadScopes {
        final Thread owner;
        @Nullable MemoryScope head;
        int size;
        final ArrayDeque<MemoryScope> handedOver = new ArrayDeque<>();
        /** The owner has died and a sweep dropped its scopes: nothing handed to it now would ever be taken. */
        boolean dropped;

        ThreadScopes(Thread owner) {
            this.owner = owner;
        }

        synchronized void link(MemoryScope scope) {
            scope.next = head;
            if (head != null) {
                head.previous = scope;
            }
            head = scope;
            size++;
        }

        synchronized void unlink(MemoryScope scope) {
            if (scope.previous == null && head != scope) {
                return; // not linked (ended twice)
            }
            if (scope.previous != null) {
                scope.previous.next = scope.next;
            } else {
                head = scope.next;
            }
            if (scope.next != null) {
                scope.next.previous = scope.previous;
            }
            scope.previous = null;
            scope.next = null;
            size--;
        }

        synchronized List<MemoryScope> openScopes() {
            List<MemoryScope> all = new ArrayList<>(size);
            for (MemoryScope s = head; s != null; s = s.next) {
                all.add(s);
            }
            return all;
        }

        synchronized @Nullable MemoryScope pollHandedOver() {
            return handedOver.poll();
        }
    }

    /** Every manager's registry, weakly: a copy of one manager may be given a view or access of another's buffer. */
    private static final Set<ScopeRegistry> EVERY = Collections.synchronizedSet(Collections.newSetFromMap(new WeakHashMap<>()));

    private final Map<Thread, ThreadScopes> byOwner = new ConcurrentHashMap<>();
    private final ThreadLocal<ThreadScopes> mine = new ThreadLocal<>();
    private final Set<MemoryScope> shared = ConcurrentHashMap.newKeySet();
    /** Shared scopes whose arena a native call held when they were to end; any thread retries them. */
    private final Set<MemoryScope> sharedToRetry = ConcurrentHashMap.newKeySet();
    /** Scopes waiting for their owner (or a retry): while zero, a call into the manager checks nothing more. */
    private volatile int waiting;
    /** Updates {@link #waiting} in place: every call into the manager reads it, one load fewer than through an AtomicInteger. */
    private static final AtomicIntegerFieldUpdater<ScopeRegistry> WAITING = AtomicIntegerFieldUpdater.newUpdater(ScopeRegistry.class, "waiting");
    /** How often scopes waiting for their owners are checked for owners that ended. */
    private static final long SWEEP_PERIOD_MILLIS = 200;
    private int ownersAtLastSweep = 16;

    public ScopeRegistry() {
        EVERY.add(this);
    }

    /** Opens and registers a scope: confined to the calling thread, or shared. */
    MemoryScope open(MemoryScope.Kind kind, BufferViews.Sharing sharing, BufferScopes buffer) {
        return open(kind, sharing, buffer, null);
    }

    /** As {@link #open(MemoryScope.Kind, BufferViews.Sharing, BufferScopes)}, for a host access that writes in {@code hostWrite}. */
    MemoryScope open(MemoryScope.Kind kind, BufferViews.Sharing sharing, BufferScopes buffer, @Nullable AccessMode hostWrite) {
        MemoryScope scope;
        if (sharing == BufferViews.Sharing.SHARED) {
            scope = new MemoryScope(kind, null, buffer, this);
            shared.add(scope);
        } else {
            ThreadScopes own = own();
            scope = new MemoryScope(kind, own, buffer, this);
            own.link(scope);
        }
        scope.hostWrite = hostWrite; // published by the buffer's list, which counts it
        buffer.add(scope);
        return scope;
    }

    /**
     * Device work a copy left queued on {@code segment} (its wait timed out): where the segment is one of the calling
     * thread's views or accesses, of this manager's buffers or of another manager's, the buffer it reaches keeps its
     * memory until that work is done, as it does for work queued on itself. On the failure path only: the thread's open
     * scopes in every registry are looked through.
     */
    void leftQueuedInto(MemorySegment segment, CompletableFuture<?> queued) {
        for (ScopeRegistry registry : List.copyOf(EVERY)) {
            MemoryScope scope = registry.ownScopeBinding(segment);
            if (scope != null) {
                scope.buffer.keepUntil(queued);
                return;
            }
        }
    }

    /** The calling thread's open scope of this registry whose segments {@code segment} is one of, if any. */
    private @Nullable MemoryScope ownScopeBinding(MemorySegment segment) {
        ThreadScopes own = mine.get();
        if (own == null) {
            return null;
        }
        List<MemoryScope> open = new ArrayList<>();
        synchronized (own) {
            for (MemoryScope scope = own.head; scope != null; scope = scope.next) {
                open.add(scope);
            }
        }
        for (MemoryScope scope : open) { // outside the list's monitor: a scope's own is taken to read its arena
            if (scope.binds(segment)) {
                return scope;
            }
        }
        return null;
    }

    private ThreadScopes own() {
        ThreadScopes own = mine.get();
        if (own == null) {
            Thread current = Thread.currentThread();
            own = new ThreadScopes(current);
            mine.set(own);
            byOwner.put(current, own);
            if (byOwner.size() > 2 * ownersAtLastSweep) {
                sweepDeadOwners();
            }
        }
        return own;
    }

    void removed(MemoryScope scope, boolean ownerWatched) {
        if (ownerWatched) {
            WAITING.decrementAndGet(this);
        }
        ThreadScopes list = scope.list;
        if (list != null) {
            list.unlink(scope);
        } else {
            shared.remove(scope);
            if (sharedToRetry.remove(scope)) {
                WAITING.decrementAndGet(this);
            }
        }
    }

    void handToOwner(MemoryScope scope) {
        ThreadScopes list = Objects.requireNonNull(scope.list);
        boolean ownerDropped;
        synchronized (list) {
            ownerDropped = list.dropped;
            if (!ownerDropped) {
                list.handedOver.add(scope);
            }
        }
        if (ownerDropped) { // the owner died and was swept since the caller saw it alive
            scope.abandon();
            return;
        }
        WAITING.incrementAndGet(this);
        if (!scope.isOpen()) { // the owner ended it meanwhile, maybe after its last look at what was handed to it
            boolean withdrawn;
            synchronized (list) {
                withdrawn = list.handedOver.remove(scope);
            }
            if (withdrawn) {
                WAITING.decrementAndGet(this);
            }
            return;
        }
        // the owner may have died meanwhile, or may end without calling in again: sweep until nothing waits
        if (!list.owner.isAlive()) {
            sweepDeadOwners();
        }
        watchForEndedOwners();
    }

    /**
     * A closed buffer's access that its owner, alive, has not ended, or view in a view scope still open there: it waits
     * as a handed-over view does, so that the sweeper drops it once the owner ends without ending it (nothing else would
     * give the memory back).
     */
    void watchOwnerOf(MemoryScope scope) {
        if (!scope.watchOwner()) {
            return;
        }
        WAITING.incrementAndGet(this);
        if (scope.ownerHasEnded()) {
            sweepDeadOwners();
        }
        watchForEndedOwners();
    }

    /** One daemon thread for the JVM, sweeping the registries that have scopes waiting for their owners or for a native call. */
    private static final class Sweeper {
        static final ScheduledExecutorService THREAD = Executors.newSingleThreadScheduledExecutor(
                LibraryThreads.daemons("compute-memory-scope-sweeper", false));
    }

    private final AtomicBoolean watching = new AtomicBoolean();

    private void watchForEndedOwners() {
        if (waiting > 0 && watching.compareAndSet(false, true)) {
            Sweeper.THREAD.schedule(this::sweepWhileWaiting, SWEEP_PERIOD_MILLIS, TimeUnit.MILLISECONDS);
        }
    }

    private void sweepWhileWaiting() {
        try {
            sweepDeadOwners();
            retryShared(); // a native call that held one has returned, maybe, and nobody else may call in again
        } finally {
            watching.set(false);
            watchForEndedOwners(); // again while scopes still wait (an owner that lives on keeps it going, cheaply)
        }
    }

    void retryLater(MemoryScope scope) {
        if (sharedToRetry.add(scope)) {
            WAITING.incrementAndGet(this);
        }
        watchForEndedOwners(); // and for the native call's return: the sweeper retries it too
    }

    /**
     * Ends the scopes other threads handed to the calling thread, and retries shared ones a native call held.
     * Called on the way into the manager; one volatile read when there is nothing to do. The buffers were closed
     * elsewhere: a release that fails here is told, not thrown into the call on the way in, which is no part of it.
     */
    public void endHandedOver() {
        if (waiting == 0) {
            return;
        }
        ThreadScopes own = mine.get();
        if (own != null) {
            for (MemoryScope scope; (scope = own.pollHandedOver()) != null; ) {
                WAITING.decrementAndGet(this);
                endTellingFailure(scope);
            }
        }
        retryShared();
    }

    /** The manager is closed: ends every scope of the calling thread, handed to it or not. */
    public void endAllOfCurrentThread() {
        endHandedOver();
        ThreadScopes own = mine.get();
        if (own != null) {
            for (MemoryScope scope : own.openScopes()) {
                endTellingFailure(scope);
            }
        }
    }

    /** Ends one of the calling thread's scopes on behalf of another call: a release that fails is told, not thrown. */
    private static void endTellingFailure(MemoryScope scope) {
        try {
            scope.end();
        } catch (RuntimeException | Error e) {
            releaseFailed(e);
        }
    }

    private void retryShared() {
        for (MemoryScope scope : sharedToRetry) {
            try {
                scope.endUnlessInUse(); // a native call still holding it: the next call tries again
            } catch (RuntimeException | Error e) {
                releaseFailed(e); // ended, on behalf of whoever closed its buffer
            }
        }
    }

    /**
     * Drops the scopes of threads that have ended: nobody can reach their confined segments any more. Runs on behalf of
     * others (a thread's first view, another buffer's close, the sweeper): a release that fails is told, not thrown.
     */
    public void sweepDeadOwners() {
        for (ThreadScopes list : byOwner.values()) {
            if (!list.owner.isAlive()) {
                byOwner.remove(list.owner, list);
                List<MemoryScope> handed;
                synchronized (list) {
                    list.dropped = true;
                    handed = List.copyOf(list.handedOver);
                    list.handedOver.clear();
                }
                WAITING.addAndGet(this, -handed.size());
                for (MemoryScope scope : list.openScopes()) {
                    try {
                        scope.abandon();
                    } catch (RuntimeException | Error e) {
                        // its release failed (a free the memory resource refused): the owner's list is gone, so the
                        // others must be dropped now, or their memory would never come back
                        releaseFailed(e);
                    }
                }
            }
        }
        ownersAtLastSweep = Math.max(16, byOwner.size());
    }

    /** Scopes open now: summed from every thread's list, so that opening one touches no counter other threads share. */
    public int openScopes() {
        int open = shared.size();
        for (ThreadScopes list : byOwner.values()) {
            synchronized (list) {
                open += list.size;
            }
        }
        return open;
    }

    /**
     * The manager is closing: ends the calling thread's scopes and the shared ones, hands every other thread's to
     * it, and waits until none is open or {@code deadlineNanos} (a {@link System#nanoTime()} value) has passed.
     * True when none is open. An interrupt does not cut the wait short (that would keep the pools' memory for good, as
     * a view held past the timeout does); it is kept for the caller.
     */
    public boolean closeAll(long deadlineNanos) {
        Thread current = Thread.currentThread();
        for (ThreadScopes list : byOwner.values()) {
            for (MemoryScope scope : list.openScopes()) {
                try {
                    if (list.owner == current) {
                        scope.end();
                    } else {
                        scope.endOrHandOver();
                    }
                } catch (RuntimeException | Error e) {
                    // a release that failed (a free the memory resource refused) stops no other scope's end, nor the close
                    releaseFailed(e);
                }
            }
        }
        for (MemoryScope scope : shared) {
            try {
                scope.endOrHandOver();
            } catch (RuntimeException | Error e) {
                releaseFailed(e);
            }
        }
        long pause = TimeUnit.MICROSECONDS.toNanos(50);
        // parkNanos returns at once while the interrupt is set: taken off for the wait, so that it does not spin
        boolean interrupted = false;
        try {
            while (openScopes() > 0 && System.nanoTime() - deadlineNanos < 0) {
                sweepDeadOwners();
                retryShared();
                LockSupport.parkNanos(pause);
                pause = Math.min(pause * 2, TimeUnit.MILLISECONDS.toNanos(5));
                interrupted |= Thread.interrupted();
            }
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
        return openScopes() == 0;
    }

    /**
     * A closed buffer's memory, given back as a scope (or an op's hold) ended on behalf of another thread or buffer, was
     * refused (its memory resource threw from the free): told here, since the call that ended it is no part of that free.
     */
    static void releaseFailed(Throwable failure) {
        LOG.log(System.Logger.Level.WARNING, "giving a closed buffer's memory back failed as the last view, access, op or copy "
                + "holding it ended (the memory resource refused the free); the call that ended it goes on", failure);
    }

    /** Scopes waiting for their owners or for a retry: while any do, the sweeper runs and calls in look for them. */
    int waitingScopes() {
        return waiting;
    }

    /** The threads still holding a view or an access, for the message of a close that had to keep memory. */
    public List<String> holders() {
        List<String> names = new ArrayList<>();
        byOwner.forEach((thread, list) -> {
            if (list.size > 0) {
                names.add(MemoryScope.nameOf(thread));
            }
        });
        if (!shared.isEmpty()) {
            names.add(shared.size() + " shared access(es)");
        }
        return names;
    }
}
