package dev.compute.memory;

import java.util.List;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;

/** The manager's listeners as one, each call guarded: a listener that throws is logged, and the pool goes on. */
final class SafeEventListener implements MemoryEventListener {

    private static final System.Logger LOG = System.getLogger(UnifiedMemoryManager.class.getName());

    private final List<MemoryEventListener> listeners;

    private SafeEventListener(List<MemoryEventListener> listeners) {
        this.listeners = List.copyOf(listeners);
    }

    /** {@link MemoryEventListener#NONE} when there are none, so that an unobserved pool pays nothing. */
    static MemoryEventListener of(List<MemoryEventListener> listeners) {
        return listeners.isEmpty() ? NONE : new SafeEventListener(listeners);
    }

    private void each(Consumer<MemoryEventListener> call) {
        for (MemoryEventListener listener : listeners) {
            try {
                call.accept(listener);
            } catch (RuntimeException e) {
                LOG.log(System.Logger.Level.WARNING, "memory event listener " + listener + " failed", e);
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
