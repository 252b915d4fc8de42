package dev.compute.memory;

import dev.compute.memory.budget.Admission;
import dev.compute.memory.budget.BudgetAccount;
import dev.compute.memory.budget.BudgetEntry;
import dev.compute.memory.budget.BudgetLedger;
import dev.compute.memory.budget.BudgetLedger.Claimant;
import dev.compute.memory.budget.BudgetNode;
import dev.compute.memory.internal.WithdrawnFirst;
import dev.compute.memory.lifetime.BufferCore;
import dev.compute.memory.lifetime.LeakDetector;
import dev.compute.memory.manager.AllocationWaiters;
import dev.compute.memory.manager.BlockAllocation;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Predicate;
import java.util.function.Supplier;
import java.util.function.UnaryOperator;
import org.jspecify.annotations.Nullable;

/**
 * How a {@link MemoryBudget} allocates, in every form. The common case first: a request that fits in the room the
 * budget keeps on the thread's stripe is let in there (counted against every limit already) and goes to the manager
 * with what the budget counts it by, which the buffer hands back with its memory. Else the bytes are claimed in the
 * budget's books first (refused there without touching the pool), then the manager's own allocation, then the buffer
 * counted, or the claim given back whatever the manager threw. A buffer made while its budget closed is closed again,
 * not lost.
 */
final class BudgetAllocations {

    private final PooledMemoryManager manager;
    private final BudgetLedger<BufferCore> ledger;
    private final BudgetAccount<BufferCore> account;
    /** Requests let into the budget and waiting for the pool's room: a close of the budget fails them and gives their bytes back. */
    private final Set<PoolWait> waitingForThePool = ConcurrentHashMap.newKeySet();

    /** A request's wait in the manager's queue ({@code pool}) and what its caller holds ({@code result}). */
    /** {@code claimBack}: completes once the pool's wait gave the request's bytes back to the budgets. */
    private record PoolWait(CompletableFuture<UnifiedBuffer> pool, CompletableFuture<UnifiedBuffer> result, CompletableFuture<Void> claimBack) {}

    /**
     * What the caller of {@code allocateAsync} holds. Ended by its caller (cancelled, or completed as {@code orTimeout}
     * does), the request leaves the budget's queue or the pool's before the functions added to it run, as the manager's
     * own requests do: none sees it counted as waiting. Its bytes are given back by then too, wherever it is on its way
     * between the two, except where the pool is trying to serve it at that moment (its out-of-memory handlers may be
     * running): they stay counted until that attempt ends and any buffer it made is back in the pool, so that the books
     * never hold less than the pool lends; the caller's ending does not wait for it, which could take as long as the
     * application's handlers do.
     */
    private static final class Request extends WithdrawnFirst<UnifiedBuffer> {
        private final Admission admitted;
        /** Gives the bytes back to the budgets: run by whoever takes them to give them back. */
        private final Runnable giveBack;
        private volatile @Nullable CompletableFuture<UnifiedBuffer> pool;

        Request(Admission admitted, Runnable giveBack) {
            this.admitted = admitted;
            this.giveBack = giveBack;
        }

        /**
         * Ends the waits under way; their own ending then leaves this future to its caller's completion. Let in and not yet
         * on its way to the pool, it gives its bytes back here (one not yet told does so in its budget's queue).
         */
        @Override
        protected void withdraw() {
            admitted.cancel(false);
            if (admitted.isDone() && !admitted.isCompletedExceptionally() && admitted.takeBytes(Admission.Taker.HOLDER)) {
                giveBack.run();
            }
            CompletableFuture<UnifiedBuffer> waiting = pool;
            if (waiting != null) {
                waiting.cancel(false);
            }
        }
    }

    BudgetAllocations(PooledMemoryManager manager, BudgetLedger<BufferCore> ledger, BudgetAccount<BufferCore> account) {
        this.manager = manager;
        this.ledger = ledger;
        this.account = account;
    }

    UnifiedBuffer allocate(DataType type, long count, MemoryLocation location) {
        Objects.requireNonNull(type, "type");
        Objects.requireNonNull(location, "location"); // refused as the manager refuses it, before the room is looked at
        long bytes = BlockAllocation.elementBytes(type, count);
        BudgetNode<BufferCore> node = ledger.take(account, location, bytes);
        if (node != null) {
            UnifiedBuffer buffer;
            Object requesting = ledger.markRequestOf(account);
            try {
                buffer = manager.allocate(type, count, location, node);
            } catch (Throwable e) {
                ledger.failed(node);
                sayThrough(e, location);
                throw e;
            } finally {
                ledger.unmarkRequest(requesting);
            }
            if (!ledger.settled(node, buffer.core())) {
                throw closedAgain(List.of(buffer));
            }
            return buffer;
        }
        manager.requireLocation(location);
        claim(location, bytes, 1);
        UnifiedBuffer buffer;
        Object requesting = ledger.markRequestOf(account);
        try {
            buffer = manager.allocate(type, count, location);
        } catch (Throwable e) {
            ledger.cancel(account, location, bytes, Claimant.THIS_THREAD);
            sayThrough(e, location);
            throw e;
        } finally {
            ledger.unmarkRequest(requesting);
        }
        count(location, Claimant.THIS_THREAD, List.of(buffer), new long[] {bytes});
        return buffer;
    }

    List<UnifiedBuffer> allocateBatch(DataType type, long[] counts, MemoryLocation location) {
        Objects.requireNonNull(type, "type");
        Objects.requireNonNull(location, "location");
        long[] bytes = BlockAllocation.batchBytes(type, counts, location);
        long total = 0;
        for (long each : bytes) {
            total += each;
        }
        BudgetNode<BufferCore>[] nodes = ledger.takeAll(account, location, bytes, total);
        if (nodes != null) {
            List<UnifiedBuffer> batch;
            Object requesting = ledger.markRequestOf(account);
            try {
                batch = manager.allocateBatch(type, counts, location, nodes);
            } catch (Throwable e) {
                for (BudgetNode<BufferCore> node : nodes) {
                    ledger.failed(node);
                }
                sayThrough(e, location);
                throw e;
            } finally {
                ledger.unmarkRequest(requesting);
            }
            if (!ledger.settledAll(nodes, batch.stream().map(UnifiedBuffer::core).toList())) {
                throw closedAgain(batch);
            }
            return batch;
        }
        manager.requireLocation(location);
        claim(location, total, counts.length);
        List<UnifiedBuffer> batch;
        Object requesting = ledger.markRequestOf(account);
        try {
            batch = manager.allocateBatch(type, counts, location);
        } catch (Throwable e) {
            ledger.cancel(account, location, total, Claimant.THIS_THREAD);
            sayThrough(e, location);
            throw e;
        } finally {
            ledger.unmarkRequest(requesting);
        }
        count(location, Claimant.THIS_THREAD, batch, bytes);
        return batch;
    }

    CompletableFuture<UnifiedBuffer> allocateAsync(DataType type, long count, MemoryLocation location, Duration timeout) {
        Objects.requireNonNull(type, "type");
        long bytes = BlockAllocation.elementBytes(type, count);
        if (Objects.requireNonNull(timeout, "timeout").isNegative()) {
            throw new IllegalArgumentException("the wait for memory must not be negative: " + timeout);
        }
        manager.requireLocation(location);
        Deadline deadline = Deadline.after(timeout);
        Admission admitted = ledger.claimLater(account, location, bytes, timeout);
        // let in later, it is allocated on the thread that made room: as asked for here, for its allocation site
        @Nullable List<StackTraceElement> askedAt = admitted.isDone() ? null : LeakDetector.callerFrames(Integer.MAX_VALUE);
        Request result = new Request(admitted, () -> ledger.cancel(account, location, bytes, Claimant.QUEUED_REQUEST));
        // completed anyhow (cancelled, or by its caller: orTimeout, completeExceptionally), the request leaves the
        // budget's queue, as the manager's leaves its own; completed here, the wait is over already and this does nothing
        result.whenComplete((buffer, failure) -> admitted.cancel(false));
        admitted.whenComplete((room, refusal) -> {
            if (admitted.isCancelled()) {
                return; // by the request's ending, whose own failure or value it keeps
            }
            if (refusal != null) {
                refused(location, bytes, unwrapped(refusal));
                result.completeExceptionally(unwrapped(refusal));
            } else if (askedAt == null) {
                fromThePool(type, count, location, bytes, timeout, deadline, result);
            } else {
                LeakDetector.servedAsAskedAt(askedAt, () -> {
                    fromThePool(type, count, location, bytes, timeout, deadline, result);
                    return null;
                });
            }
        });
        return result;
    }

    /** With the bytes counted in the budget: the pool's room, through the manager's queue, for the rest of the wait. */
    private void fromThePool(DataType type, long count, MemoryLocation location, long bytes, Duration asked, Deadline deadline,
                             Request result) {
        CompletableFuture<UnifiedBuffer> pool;
        CompletableFuture<Void> claimBack = new CompletableFuture<>();
        // every attempt, here or later on the waiter thread as memory comes back, is made as this budget's: a reserving
        // budget's is served from memory kept for reservations, its own reservation within reach
        UnaryOperator<Supplier<UnifiedBuffer>> servedAs = attempt -> () -> {
            Object requesting = ledger.markRequestOf(account);
            try {
                return attempt.get();
            } finally {
                ledger.unmarkRequest(requesting);
            }
        };
        // the bytes stay counted until no memory is held for the request: a buffer made for it as it was cancelled
        // is given back to the pool first, so that the budget's books never hold less than the pool lends it
        Runnable unserved = () -> {
            try {
                if (result.admitted.bytesTakenBy(Admission.Taker.CALLER)) { // else its holder's ending took them first
                    result.giveBack.run();
                }
            } finally {
                claimBack.complete(null);
            }
        };
        Predicate<@Nullable CompletableFuture<UnifiedBuffer>> reached = queued -> {
            // published before the bytes are taken: an ending that finds them taken cancels the pool's wait
            if (queued != null) {
                result.pool = queued;
            }
            return result.admitted.takeBytes(Admission.Taker.CALLER); // false: ended first, and given back
        };
        try {
            pool = manager.allocateAsync(type, count, location, deadline.left(), asked,
                    new AllocationWaiters.BudgetTerms<>(ledger.withinReservation(account, location), servedAs, unserved, reached));
        } catch (Throwable e) {
            if (result.admitted.takeBytes(Admission.Taker.HOLDER)) { // it never reached the pool (the manager closed)
                result.giveBack.run();
            }
            result.completeExceptionally(e);
            return;
        }
        result.pool = pool;
        result.whenComplete((buffer, failure) -> pool.cancel(false)); // ended before it saw the pool's wait: see Request
        PoolWait wait = new PoolWait(pool, result, claimBack);
        waitingForThePool.add(wait);
        if (ledger.isClosed(account)) { // closed after the claim was let in and before the close could see this wait
            endWait(wait);
        }
        pool.whenComplete((buffer, failure) -> {
            waitingForThePool.remove(wait);
            if (failure != null) { // its bytes go back as the pool says nothing is held for it
                if (!pool.isCancelled()) { // else by the request's ending, whose own failure or value it keeps
                    Throwable refusal = unwrapped(failure);
                    sayThrough(refusal, location);
                    result.completeExceptionally(refusal);
                }
                return;
            }
            try {
                count(location, Claimant.QUEUED_REQUEST, List.of(buffer), new long[] {bytes});
            } catch (IllegalStateException closed) {
                result.completeExceptionally(closed);
                return;
            }
            if (!result.complete(buffer)) {
                buffer.close(); // cancelled while it came
            }
        });
    }

    /**
     * The budget closed: its requests waiting for the pool's room fail now, with the budget's close, and their bytes go
     * back to the budgets above it at once; a buffer the pool gives meanwhile is closed, as for any request under way.
     */
    void budgetClosed() {
        for (PoolWait wait : waitingForThePool) {
            endWait(wait);
        }
    }

    private void endWait(PoolWait wait) {
        IllegalStateException closed = new IllegalStateException("memory budget '" + account.path()
                + "' was closed while the request waited for the pool's room");
        // cancelled here, or already by the other ending of this wait (the close's, and the request's own look at the
        // budget as it began to wait, may both come)
        if (wait.pool().cancel(false) || wait.pool().isCancelled()) {
            // the request fails once its claim is back (at once, or as the pool's attempt under way for it ends), so
            // that whoever sees it fail sees its bytes back in the budgets above
            wait.claimBack().whenComplete((given, failure) -> wait.result().completeExceptionally(closed));
        } else {
            wait.result().completeExceptionally(closed); // the pool's wait ended first: a buffer it gave is closed by its count
        }
    }

    UnifiedBuffer mapFile(Path file, DataType type, FileMapMode mode, long byteOffset, @Nullable Long byteLength) throws IOException {
        if (ledger.isClosed(account)) {
            throw closed();
        }
        UnifiedBuffer buffer = byteLength == null ? manager.mapFile(file, type, mode) : manager.mapFile(file, type, mode, byteOffset, byteLength);
        BudgetEntry<BufferCore> entry = ledger.settleMapped(account, buffer.core(), buffer.byteSize());
        if (entry == null) {
            throw closedAgain(List.of(buffer));
        }
        if (!buffer.core().countedAs(entry)) { // the manager closed and unmapped it meanwhile
            ledger.released(entry);
            throw closedAgain(List.of(buffer));
        }
        if (!ledger.handOutMapped(entry)) { // the budget closed meanwhile: no leftover of its close, closed here
            throw closedAgain(List.of(buffer));
        }
        return buffer;
    }

    /** Claims the bytes now, telling the manager's listeners of a refusal as of any out-of-memory. */
    private void claim(MemoryLocation location, long bytes, int buffers) {
        try {
            ledger.claim(account, location, bytes, buffers);
        } catch (DeviceOutOfMemoryException e) {
            refused(location, bytes, e);
            throw e;
        }
    }

    /**
     * Has the pool's out-of-memory for a request this budget let in say in its message which budget the request came
     * through and what that budget holds and reserves (its books are back as it fails): without it a tenant's failure
     * reads as any other's, and a reservation the pool could not honour (memory taken outside the budgets, or by the
     * pool's rounding and fragmentation) does not show. Its kind and reason stay the pool's.
     */
    private void sayThrough(Throwable failure, MemoryLocation location) {
        if (failure instanceof DeviceOutOfMemoryException refusal && refusal.reason() != OutOfMemoryReason.BUDGET_LIMIT) {
            BudgetStatistics figures = ledger.statistics(account);
            BudgetStatistics.Location there = figures.locations().get(location);
            long heldThere = there == null ? 0 : there.allocatedBytes();
            long reservedThere = there == null ? 0 : there.reservedBytes();
            refusal.cameThroughBudget("; the pool refused it, not a budget: it came through memory budget '" + account.path() + "', which holds "
                    + figures.allocatedBytes() + " bytes (" + heldThere + " of them at " + location + ") of its limit of " + figures.limitBytes()
                    + " bytes" + (reservedThere > 0 ? " and reserves " + reservedThere + " bytes of " + location : ""));
        }
    }

    private void refused(MemoryLocation location, long bytes, Throwable failure) {
        if (failure instanceof DeviceOutOfMemoryException refusal && refusal.reason() == OutOfMemoryReason.BUDGET_LIMIT) {
            manager.budgetRefused(location, bytes);
        }
    }

    /**
     * Counts the buffers a claim got, each carrying what the budget counts it by from now; where the budget closed
     * meanwhile (or the manager, taking their memory back), closes them again and throws.
     */
    private void count(MemoryLocation location, Claimant claimant, List<UnifiedBuffer> buffers, long[] bytes) {
        BufferCore[] cores = new BufferCore[buffers.size()];
        for (int i = 0; i < cores.length; i++) {
            cores[i] = buffers.get(i).core();
        }
        BudgetNode<BufferCore>[] nodes = ledger.settleAll(account, location, claimant, cores, bytes);
        if (nodes == null) {
            throw closedAgain(buffers);
        }
        boolean carried = true;
        for (int i = 0; i < nodes.length; i++) {
            if (!cores[i].countedAs(nodes[i])) {
                ledger.released(nodes[i]);
                carried = false;
            }
        }
        if (!carried || !ledger.handedOut(nodes)) { // a close that came first counted them as no one's leftovers
            throw closedAgain(buffers);
        }
    }

    /** Closes buffers made for a budget that closed meanwhile; the exception to throw, with whatever their close threw. */
    private IllegalStateException closedAgain(List<UnifiedBuffer> buffers) {
        IllegalStateException closed = closedMeanwhile();
        for (UnifiedBuffer buffer : buffers) {
            try {
                buffer.close();
            } catch (Throwable e) {
                closed.addSuppressed(e);
            }
        }
        return closed;
    }

    private IllegalStateException closed() {
        return new IllegalStateException("memory budget '" + account.path() + "' is closed");
    }

    private IllegalStateException closedMeanwhile() {
        return new IllegalStateException("memory budget '" + account.path() + "' was closed while the allocation was under way");
    }

    private static Throwable unwrapped(Throwable failure) {
        return failure instanceof CompletionException && failure.getCause() != null ? failure.getCause() : failure;
    }

    /** When a wait ends; a timeout too long for nanoseconds never ends. */
    private record Deadline(long atNanos, @Nullable Duration forever) {

        static Deadline after(Duration timeout) {
            try {
                return new Deadline(Math.addExact(System.nanoTime(), timeout.toNanos()), null);
            } catch (ArithmeticException tooLong) {
                return new Deadline(0, timeout);
            }
        }

        Duration left() {
            return forever != null ? forever : Duration.ofNanos(Math.max(0, atNanos - System.nanoTime()));
        }
    }
}
