package dev.compute.memory.lifetime;

import dev.compute.memory.spi.ComputeBackend;
import dev.compute.memory.spi.WorkGroup;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.jspecify.annotations.Nullable;

/**
 * Device work queued on one root's memory and not known to be done, each piece apart: a device access or an op orders
 * its thread's queue after each piece on the device where the backend can ({@link ComputeBackend#orderAfter}), so it
 * waits on the host only for what the backend cannot order; host reads, moves and frees wait for every piece. Under
 * the root's monitor.
 */
final class WorkInFlight {

    private final List<CompletableFuture<?>> pieces = new ArrayList<>(2);

    /** Adds work recorded on the buffer; pieces it supersedes (on the same in-order queue or stream) are dropped. */
    void add(CompletableFuture<?> work, ComputeBackend backend) {
        prune();
        if (work instanceof WorkGroup group) {
            for (CompletableFuture<?> piece : group.pieces()) {
                if (!piece.isDone()) {
                    add(piece, backend);
                }
            }
        } else {
            pieces.removeIf(earlier -> backend.supersedes(work, earlier));
            pieces.add(work);
        }
    }

    boolean isDone() {
        prune();
        return pieces.isEmpty();
    }

    /** Every piece as one future. */
    CompletableFuture<?> all() {
        prune();
        return switch (pieces.size()) {
            case 0 -> BufferCore.DONE;
            case 1 -> pieces.getFirst();
            default -> CompletableFuture.allOf(pieces.toArray(CompletableFuture[]::new));
        };
    }

    /**
     * Orders the calling thread's queue after every piece the backend can order it after; the others, as one future
     * the caller must wait for on the host, or null when there are none.
     */
    @Nullable CompletableFuture<?> orderOnDevice(ComputeBackend backend) {
        prune();
        List<CompletableFuture<?>> unordered = null;
        for (CompletableFuture<?> piece : pieces) {
            if (!backend.orderAfter(piece)) {
                if (unordered == null) {
                    unordered = new ArrayList<>(pieces.size());
                }
                unordered.add(piece);
            }
        }
        if (unordered == null) {
            return null;
        }
        return unordered.size() == 1 ? unordered.getFirst() : CompletableFuture.allOf(unordered.toArray(CompletableFuture[]::new));
    }

    private void prune() {
        pieces.removeIf(CompletableFuture::isDone);
    }
}
