package dev.compute.memory.lifetime;

import dev.compute.memory.DeviceTimeoutException;
import dev.compute.memory.DeviceWaitInterruptedException;
import dev.compute.memory.spi.ComputeBackend;
import dev.compute.memory.spi.CompletionThreads;
import dev.compute.memory.spi.WorkGroup;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;

/**
 * Device work queued on one root's memory and not known to be done, each piece apart, and how a use of the memory
 * waits for it: a device access or an op orders its thread's queue after each piece on the device where the backend
 * can ({@link ComputeBackend#orderAfter}), so it waits on the host only for what the backend cannot order
 * ({@link #unordered}); host reads, moves and frees wait for every piece ({@link #pending}). Every wait is bounded
 * ({@link #await}). Under the root's monitor, but for {@link #await}, which runs without it.
 */
final class WorkInFlight {

    /** For {@link #after}: a use waits for all the work in flight, or only for what its thread's queue cannot be ordered after. */
    static final Function<WorkInFlight, @Nullable CompletableFuture<?>> ALL = WorkInFlight::pending;
    static final Function<WorkInFlight, @Nullable CompletableFuture<?>> UNORDERED = WorkInFlight::unordered;

    private final ComputeBackend backend;
    private final List<CompletableFuture<?>> pieces = new ArrayList<>(2);

    /** An action under the root's monitor: given the buffer (a root or a slice), its root and an argument. */
    @FunctionalInterface
    interface Locked<A, T> {
        T apply(BufferCore buffer, BufferCore root, A argument);
    }

    /**
     * Runs {@code action} under the root's monitor, given {@code buffer}, its root and {@code argument}, once the work
     * {@code waitFor} picks is done ({@link #ALL} for {@link BufferCore#whenIdle}; {@link #UNORDERED} for device work
     * of the calling thread, an op or a device access, whose queue the backend orders after on the device what it can,
     * so that only what it cannot is waited for on the host); an action that captures nothing allocates nothing (the hot
     * paths). The wait happens without the monitor ({@link #await}); a closed buffer fails at once.
     */
    static <A, T> T after(BufferCore buffer, Function<WorkInFlight, @Nullable CompletableFuture<?>> waitFor, A argument,
                          Locked<A, T> action) {
        BufferCore root = buffer.root();
        while (true) {
            CompletableFuture<?> work;
            synchronized (root) {
                buffer.openBlock();
                work = root.inFlight == null ? null : waitFor.apply(root.inFlight);
                if (work == null) {
                    if (root.inFlight != null && root.inFlight.pieces.isEmpty()) { // waitFor pruned it just now
                        root.inFlight = null;
                    }
                    return action.apply(buffer, root, argument);
                }
            }
            await(work, buffer.host.deviceWaitTimeout(), buffer);
        }
    }

    WorkInFlight(ComputeBackend backend) {
        this.backend = backend;
    }

    /** Adds work recorded on the buffer; pieces it supersedes (on the same in-order queue or stream) are dropped. */
    void add(CompletableFuture<?> work) {
        prune();
        if (work instanceof WorkGroup group) {
            for (CompletableFuture<?> piece : group.pieces()) {
                if (!piece.isDone()) {
                    add(piece);
                }
            }
        } else {
            for (int i = pieces.size() - 1; i >= 0; i--) { // by index: no lambda, no removeIf bit set, on every access and op
                if (backend.supersedes(work, pieces.get(i))) {
                    pieces.remove(i);
                }
            }
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
        return joined();
    }

    /** Every piece as one future, or null when all are done: what a host read, move or free waits for. */
    @Nullable CompletableFuture<?> pending() {
        prune();
        return pieces.isEmpty() ? null : joined();
    }

    private CompletableFuture<?> joined() {
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
    @Nullable CompletableFuture<?> unordered() {
        prune();
        List<CompletableFuture<?>> unordered = null;
        for (int i = 0; i < pieces.size(); i++) { // by index: no iterator on every access and op
            CompletableFuture<?> piece = pieces.get(i);
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

    /**
     * Waits for {@code work} queued on {@code buffer} at most {@code limit}, holding no monitor; failed or cancelled
     * work is over too (the memory is free of it either way).
     *
     * @throws DeviceTimeoutException past the limit, or {@link DeviceWaitInterruptedException} when interrupted, saying
     *     nothing was changed
     */
    static void await(CompletableFuture<?> work, Duration limit, Object buffer) {
        CompletionThreads.beforeWaiting(); // the work may be completed later by the very task that runs this wait
        long start = System.nanoTime();
        try {
            work.get(limit.toNanos(), TimeUnit.NANOSECONDS);
        } catch (ExecutionException | CancellationException failedWorkIsOverToo) {
            // the memory is free of it either way
        } catch (TimeoutException e) {
            throw new DeviceTimeoutException("device work queued on " + buffer + " did not finish within " + limit.toMillis()
                    + " ms (compute.memory.device-wait-timeout): a kernel that runs longer, or a device or a future recorded"
                    + " on the buffer that never completes; nothing was changed, and the buffer's memory stays held until"
                    + " the work is over", limit);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new DeviceWaitInterruptedException("interrupted while waiting for device work queued on " + buffer
                    + "; nothing was changed", Duration.ofNanos(System.nanoTime() - start), e);
        }
    }

    private void prune() {
        for (int i = pieces.size() - 1; i >= 0; i--) { // by index: removeIf allocates a bit set whenever it removes
            if (pieces.get(i).isDone()) {
                pieces.remove(i);
            }
        }
    }
}
