package dev.compute.memory.manager;

import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.lifetime.BufferCore;
import dev.compute.memory.lifetime.ScopeRegistry;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import org.jspecify.annotations.Nullable;

/**
 * The one door of a manager: whether it is closed, the calls under way ({@link ActiveCalls}) that its close waits for
 * before freeing anything, and the registry of open views and accesses, whose scopes handed to a thread it ends on the
 * way in. Allocations, frees, copies, ops, views and accesses all pass here.
 */
public final class CallGate {

    /** How often {@link #awaitCalls} looks again at once before it parks. */
    private static final int SPINS_BEFORE_PARKING = 1000;

    private final ActiveCalls calls = new ActiveCalls();
    private final ScopeRegistry scopes = new ScopeRegistry();
    private volatile boolean closed;
    /** The rest of a close started inside a call (by a listener or handler): run by the call that ends last. */
    private final AtomicReference<@Nullable Runnable> whenCallsEnd = new AtomicReference<>();

    public ScopeRegistry scopes() {
        return scopes;
    }

    public boolean isClosed() {
        return closed;
    }

    /**
     * Counts a call of the manager's own in (an allocation, a mapping), after ending the scopes other threads handed to
     * this one; a thread told the manager is closed loses its views too, and its call is refused before it is counted
     * in: threads that go on calling a closed manager must not keep its close waiting for calls under way. A call that
     * the close overtakes once counted in finds the manager closed itself.
     */
    public int enter() {
        scopes.endHandedOver();
        if (closed) {
            scopes.endAllOfCurrentThread();
            throw closedManager();
        }
        return calls.enter();
    }

    /** Counts a call on {@code buffer} in; throws its {@link IllegalStateException} once the manager is closed. */
    public int enter(BufferCore buffer) {
        scopes.endHandedOver();
        int stripe = calls.enter();
        if (closed) {
            calls.exit(stripe);
            scopes.endAllOfCurrentThread(); // told the manager closed, this thread has lost its views too
            throw new IllegalStateException(buffer.closedByManager());
        }
        return stripe;
    }

    /**
     * Counts a call in that must finish before the manager frees anything, closed or not: the end of an access (its
     * handle records device work), a release, a trim.
     */
    public int enterAlways() {
        return calls.enter();
    }

    /** Counts a call out; a call the close overtook leaves this thread without views, as a refused one does. */
    public void exit(int stripe) {
        calls.exit(stripe);
        if (closed) {
            scopes.endAllOfCurrentThread();
            finishCloseIfIdle();
        }
    }

    /** Counts a call of {@link #enterAlways} out. */
    public void exitQuietly(int stripe) {
        calls.exit(stripe);
        if (closed) {
            finishCloseIfIdle();
        }
    }

    /**
     * Runs {@code rest} of a close once no call is under way: at once if none is, else as the last one ends. For a
     * close started inside a call (a listener or handler that closes the manager), which must not wait for the call it
     * is inside of.
     */
    void finishCloseWhenIdle(Runnable rest) {
        whenCallsEnd.set(rest);
        finishCloseIfIdle();
    }

    /** Runs the rest of a close now if one waits and no call is under way; false when none was left to run. */
    boolean finishCloseIfIdle() {
        Runnable rest = whenCallsEnd.get();
        if (rest != null && !calls.any() && whenCallsEnd.compareAndSet(rest, null)) {
            rest.run();
            return true;
        }
        return false;
    }

    /** Takes the rest of a close that still waits, to run it whatever calls are under way; null when none waits. */
    @Nullable Runnable takeCloseRest() {
        return whenCallsEnd.getAndSet(null);
    }

    /** Marks the manager closed: new calls fail. False when it was closed already. */
    synchronized boolean close() {
        if (closed) {
            return false;
        }
        closed = true;
        return true;
    }

    /**
     * Waits until no call is under way or {@code deadline} ({@link System#nanoTime()}) passed; true when none is. Spins a
     * little first (calls end in microseconds), then parks, ever longer: a call held up (a handler, a long copy) must not
     * keep a core busy for the whole close timeout. The interrupt is taken off for the wait, as parkNanos returns at
     * once while it is set, and put back after.
     */
    boolean awaitCalls(long deadline) {
        long pause = TimeUnit.MICROSECONDS.toNanos(20);
        boolean interrupted = false;
        try {
            for (int spins = 0; calls.any(); spins++) {
                if (System.nanoTime() - deadline >= 0) {
                    return false;
                }
                if (spins < SPINS_BEFORE_PARKING) {
                    Thread.onSpinWait();
                    Thread.yield();
                } else {
                    LockSupport.parkNanos(pause);
                    pause = Math.min(pause * 2, TimeUnit.MILLISECONDS.toNanos(2));
                    interrupted |= Thread.interrupted();
                }
            }
            return true;
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /** The manager's message for a call on it once closed. */
    public static IllegalStateException closedManager() {
        return new IllegalStateException("this UnifiedMemoryManager is closed");
    }

    /**
     * The out-of-memory an allocation met, or, where the manager closed while it looked for memory (an out-of-memory
     * handler or a listener of the compaction it started closed it, or another thread did), the closed manager's
     * error, the out-of-memory its cause: the pool's figures would read as memory that ran short, where there is no
     * manager left to retry on.
     */
    public RuntimeException closedDuring(DeviceOutOfMemoryException failure) {
        if (!isClosed()) {
            return failure;
        }
        IllegalStateException closed = closedManager();
        closed.initCause(failure);
        return closed;
    }
}
