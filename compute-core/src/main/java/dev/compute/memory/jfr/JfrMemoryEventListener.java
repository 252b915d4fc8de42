package dev.compute.memory.jfr;

import dev.compute.memory.AllocationSites;
import dev.compute.memory.CompactionReport;
import dev.compute.memory.MemoryEventListener;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.OutOfMemoryReason;
import org.jspecify.annotations.Nullable;

/**
 * Emits one JFR event per call. Each method asks the event whether a recording takes it before filling any field,
 * so while none does an event costs a check the JIT makes cheap and no string is built.
 */
final class JfrMemoryEventListener implements MemoryEventListener {

    @Override
    public void backendAllocated(MemoryLocation location, long bytes, long nanos) {
        BackendAllocationEvent event = new BackendAllocationEvent();
        if (event.shouldCommit()) {
            event.location = location.name();
            event.bytes = bytes;
            event.callDuration = nanos;
            event.commit();
        }
    }

    @Override
    public void backendFreed(MemoryLocation location, long bytes, long nanos) {
        BackendFreeEvent event = new BackendFreeEvent();
        if (event.shouldCommit()) {
            event.location = location.name();
            event.bytes = bytes;
            event.callDuration = nanos;
            event.commit();
        }
    }

    @Override
    public void outOfMemoryRecovery(MemoryLocation location, long requestedBytes, RecoveryOutcome outcome, long nanos) {
        OutOfMemoryRecoveryEvent event = new OutOfMemoryRecoveryEvent();
        if (event.shouldCommit()) {
            event.location = location.name();
            event.requestedBytes = requestedBytes;
            event.outcome = outcome.name();
            event.recoveryDuration = nanos;
            event.commit();
        }
    }

    @Override
    public void allocationFailed(MemoryLocation location, long requestedBytes, OutOfMemoryReason reason) {
        OutOfMemoryEvent event = new OutOfMemoryEvent();
        if (event.shouldCommit()) {
            event.location = location.name();
            event.requestedBytes = requestedBytes;
            event.reason = reason.name();
            event.commit();
        }
    }

    @Override
    public void trimmed(MemoryLocation location, long releasedBytes) {
        TrimEvent event = new TrimEvent();
        if (event.shouldCommit()) {
            event.location = location.name();
            event.releasedBytes = releasedBytes;
            event.commit();
        }
    }

    @Override
    public void compacted(CompactionReport report) {
        CompactionEvent event = new CompactionEvent();
        if (event.shouldCommit()) {
            event.location = report.location().name();
            event.buffersMoved = report.buffersMoved();
            event.bytesMoved = report.bytesMoved();
            event.buffersInUse = report.buffersInUse();
            event.releasedBytes = report.bytesReleased();
            event.fragmentationBefore = report.fragmentationBefore();
            event.fragmentationAfter = report.fragmentationAfter();
            event.compactionDuration = report.duration().toNanos();
            event.commit();
        }
    }

    @Override
    public void leakDetected(MemoryLocation location, long bytes, @Nullable String allocationSite) {
        LeakEvent event = new LeakEvent();
        if (event.shouldCommit()) {
            event.location = location.name();
            event.bytes = bytes;
            event.allocationSite = AllocationSites.shorten(allocationSite);
            event.commit();
        }
    }

    @Override
    public void snapshotRead(MemoryLocation location, int blocks, int holds, long longestHoldNanos, long nanos) {
        SnapshotReadEvent event = new SnapshotReadEvent();
        if (event.shouldCommit()) {
            event.location = location.name();
            event.blocks = blocks;
            event.holds = holds;
            event.longestHold = longestHoldNanos;
            event.readDuration = nanos;
            event.commit();
        }
    }
}
