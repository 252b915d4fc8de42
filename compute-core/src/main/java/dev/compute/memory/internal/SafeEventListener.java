package dev.compute.memory.internal;

import dev.compute.memory.CompactionReport;
import dev.compute.memory.MemoryEventListener;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.OutOfMemoryReason;
import java.util.List;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;

/**
 * Listeners as one, each call guarded: a listener that throws anything is logged, and the pool goes on. The manager
 * and every resource that tells listeners guard them so, since they tell them mid-change, under the pool's lock.
 */
public final class SafeEventListener implements MemoryEventListener {

    private static final System.Logger LOG = ManagerLog.logger();

    private final List<MemoryEventListener> listeners;

    private SafeEventListener(List<MemoryEventListener> listeners) {
        this.listeners = List.copyOf(listeners);
    }

    /** {@link MemoryEventListener#NONE} when there are none, so that an unobserved pool pays nothing. */
    public static MemoryEventListener of(List<MemoryEventListener> listeners) {
        return listeners.isEmpty() ? NONE : new SafeEventListener(listeners);
    }

    /** {@code listener} guarded, unless it is guarded already or is {@link MemoryEventListener#NONE}. */
    public static MemoryEventListener guard(MemoryEventListener listener) {
        return listener == NONE || listener instanceof SafeEventListener ? listener : new SafeEventListener(List.of(listener));
    }

    private void each(Consumer<MemoryEventListener> call) {
        for (MemoryEventListener listener : listeners) {
            UserCode.enterListener();
            try {
                call.accept(listener);
            } catch (Throwable e) {
                // an Error too (an assertion in a test's listener): the pool is mid-change where most events are told;
                // named by its class, since its toString() is the application's code too
                LOG.log(System.Logger.Level.WARNING, "memory event listener " + listener.getClass().getName() + " failed", e);
            } finally {
                UserCode.exitListener();
            }
        }
    }

    @Override
    public void backendAllocated(MemoryLocation location, long bytes, long nanos) {
        each(l -> l.backendAllocated(location, bytes, nanos));
    }

    @Override
    public void backendFreed(MemoryLocation location, long bytes, long nanos) {
        each(l -> l.backendFreed(location, bytes, nanos));
    }

    @Override
    public void outOfMemoryRecovery(MemoryLocation location, long requestedBytes, RecoveryOutcome outcome, long nanos) {
        each(l -> l.outOfMemoryRecovery(location, requestedBytes, outcome, nanos));
    }

    @Override
    public void allocationFailed(MemoryLocation location, long requestedBytes, OutOfMemoryReason reason) {
        each(l -> l.allocationFailed(location, requestedBytes, reason));
    }

    @Override
    public void trimmed(MemoryLocation location, long releasedBytes) {
        each(l -> l.trimmed(location, releasedBytes));
    }

    @Override
    public void compacted(CompactionReport report) {
        each(l -> l.compacted(report));
    }

    @Override
    public void snapshotRead(MemoryLocation location, int blocks, int holds, long longestHoldNanos, long nanos) {
        each(l -> l.snapshotRead(location, blocks, holds, longestHoldNanos, nanos));
    }

    @Override
    public void leakDetected(MemoryLocation location, long bytes, @Nullable String allocationSite) {
        each(l -> l.leakDetected(location, bytes, allocationSite));
    }
}
