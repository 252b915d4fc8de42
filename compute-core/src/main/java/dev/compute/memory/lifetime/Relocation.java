package dev.compute.memory.lifetime;

import dev.compute.memory.BufferState;
import dev.compute.memory.resource.Block;
import dev.compute.memory.resource.DeviceWork;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;

/**
 * Compaction's step for one buffer: its block moves to a place the pool holds, if nothing holds the buffer (no op or
 * copy under way, no view or access open, not closed). The move runs under the buffer's monitor, which every use takes
 * to find the block: no use can start on the old place meanwhile, and the next one finds the new place.
 */
public final class Relocation {

    /**
     * What a compaction step did with a buffer: moved it; left it, held ({@code IN_USE}) or with device work on it that
     * did not end in time ({@code WORK_PENDING}); or found no place for it.
     */
    public enum Move { MOVED, IN_USE, WORK_PENDING, NO_PLACE }

    /** Whether the data goes with a moved block: not where no copy of it lives in the block yet. */
    public enum Data { KEEP, DROP }

    /** How compaction moves a block: true when it found a place and moved it there, copying the data when asked. */
    @FunctionalInterface
    public interface BlockMover {
        boolean move(Block block, Data data);
    }

    private Relocation() {}

    /**
     * Moves {@code buffer}'s block with {@code mover} if nothing holds it. Device work still in flight on it (an access
     * just ended, an async op) is waited for without the monitor, until {@code deadline} ({@link System#nanoTime()}) at
     * most; past it the buffer counts as in use.
     */
    public static Move tryMove(BufferCore buffer, BlockMover mover, long deadline) {
        CompletableFuture<?> pending;
        synchronized (buffer) {
            if (!buffer.unheld()) {
                return Move.IN_USE;
            }
            pending = buffer.inFlightAll();
            if (pending.isDone()) {
                return moveLocked(buffer, mover);
            }
        }
        if (!DeviceWork.awaitAll(List.of(pending), deadline)) {
            return Move.WORK_PENDING;
        }
        synchronized (buffer) {
            if (!buffer.unheld()) {
                return Move.IN_USE;
            }
            return buffer.inFlightAll().isDone() ? moveLocked(buffer, mover) : Move.WORK_PENDING;
        }
    }

    /**
     * Whether nothing holds {@code buffer} now (no op, copy, view or access; device work may still be in flight on it):
     * so a compaction that found it {@link Move#IN_USE} may move it at the next try.
     */
    public static boolean letGo(BufferCore buffer) {
        synchronized (buffer) {
            return buffer.unheld();
        }
    }

    private static Move moveLocked(BufferCore buffer, BlockMover mover) {
        buffer.inFlight = null;
        Data data = buffer.state != BufferState.UNINITIALIZED && buffer.state != BufferState.HOST_ONLY ? Data.KEEP : Data.DROP;
        try {
            return mover.move(Objects.requireNonNull(buffer.block), data) ? Move.MOVED : Move.NO_PLACE;
        } catch (RuntimeException | Error e) {
            buffer.recordLeftQueued(e); // a move's copy that timed out once queued may still read the block
            throw e;
        }
    }
}
