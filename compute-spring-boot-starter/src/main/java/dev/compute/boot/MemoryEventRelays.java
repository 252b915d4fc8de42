package dev.compute.boot;

import dev.compute.memory.CompactionReport;
import dev.compute.memory.MemoryEventListener;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.OutOfMemoryReason;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.internal.SafeEventListener;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;
import org.jspecify.annotations.Nullable;

/**
 * The events of every manager the starter builds, for listeners that come later. A listener is given to the
 * builder and the manager is built before the beans that want its events exist (the meters need the meter
 * registry, which Spring makes after the manager): the starter registers one {@link Relay} per manager, and they
 * attach to it once they are made. Events before that are not seen; none are lost for those attached. A manager
 * of the application's own has no relay: give its builder a listener of your own.
 */
public final class MemoryEventRelays {

    private final Map<UnifiedMemoryManager, Relay> relays = Collections.synchronizedMap(new IdentityHashMap<>());

    /** The relay of {@code manager}, if the starter built it. */
    public Optional<Relay> of(UnifiedMemoryManager manager) {
        return Optional.ofNullable(relays.get(manager));
    }

    void register(UnifiedMemoryManager manager, Relay relay) {
        relays.put(manager, relay);
    }

    /** Passes each event on to the listeners attached now; they are called as the manager calls a listener. */
    public static final class Relay implements MemoryEventListener {

        private final List<MemoryEventListener> listeners = new CopyOnWriteArrayList<>();

        Relay() {}

        /**
         * Adds {@code listener}, guarded on its own (what it throws is logged, and the listeners after it still hear
         * the event); the returned handle detaches it.
         */
        public AutoCloseable attach(MemoryEventListener listener) {
            MemoryEventListener guarded = SafeEventListener.guard(listener);
            listeners.add(guarded);
            return () -> listeners.remove(guarded);
        }

        @Override
        public void backendAllocated(MemoryLocation location, long bytes, long nanos) {
            listeners.forEach(listener -> listener.backendAllocated(location, bytes, nanos));
        }

        @Override
        public void backendFreed(MemoryLocation location, long bytes, long nanos) {
            listeners.forEach(listener -> listener.backendFreed(location, bytes, nanos));
        }

        @Override
        public void outOfMemoryRecovery(MemoryLocation location, long requestedBytes, RecoveryOutcome outcome, long nanos) {
            listeners.forEach(listener -> listener.outOfMemoryRecovery(location, requestedBytes, outcome, nanos));
        }

        @Override
        public void allocationFailed(MemoryLocation location, long requestedBytes, OutOfMemoryReason reason) {
            listeners.forEach(listener -> listener.allocationFailed(location, requestedBytes, reason));
        }

        @Override
        public void trimmed(MemoryLocation location, long releasedBytes) {
            listeners.forEach(listener -> listener.trimmed(location, releasedBytes));
        }

        @Override
        public void compacted(CompactionReport report) {
            listeners.forEach(listener -> listener.compacted(report));
        }

        @Override
        public void leakDetected(MemoryLocation location, long bytes, @Nullable String allocationSite) {
            listeners.forEach(listener -> listener.leakDetected(location, bytes, allocationSite));
        }

        @Override
        public void snapshotRead(MemoryLocation location, int blocks, int holds, long longestHoldNanos, long nanos) {
            listeners.forEach(listener -> listener.snapshotRead(location, blocks, holds, longestHoldNanos, nanos));
        }
    }
}
