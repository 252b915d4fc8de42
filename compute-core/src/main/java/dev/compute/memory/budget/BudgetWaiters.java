package dev.compute.memory.budget;

import dev.compute.memory.BudgetExceededException;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.internal.LibraryThreads;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * Requests waiting for room in a budget ({@code MemoryBudget.allocateAsync}), the budget's half of the wait: a
 * first-in, first-out queue per budget, whose heads are tried again whenever memory counted in the budgets comes
 * back (a buffer's, a request the pool refused, a reservation given back as a budget closes). Only a queue's head is
 * tried, so a later small request never takes the room an earlier large one waits for; while any request waits, freed
 * bytes come back to the books rather than to a stripe's room, and room a stripe kept is taken back before a head is
 * left waiting. A request let in has its
 * bytes counted as under way, as {@link BudgetLedger#claim} counts them, and its future completes on a thread of its
 * own, never on the thread that gave the memory back; the caller then waits for the pool's room.
 *
 * <p>Everything here but the futures' completion runs under the ledger's lock. Each request is bounded by its
 * timeout, timed by the JDK's delayer ({@link CompletableFuture#orTimeout}); cancelling its future, or completing it otherwise,
 * takes it off the queue before the future's functions run, or, where it was let in and is not told yet, gives its
 * bytes back then; once told, whichever takes them first of its caller and its holder's ending decides
 * ({@link Admission#takeBytes}).
 */
final class BudgetWaiters<B> {

    /** Where a request let in completes: a virtual thread each, so that whatever runs on its future never runs on a freeing thread. */
    private static final Executor COMPLETIONS = Executors.newThreadPerTaskExecutor(LibraryThreads.virtual("compute-budget-waiter-"));

    /** One queued request; its fields are guarded by the ledger's lock. */
    static final class Waiter {
        final BudgetAccount<?> account;
        final MemoryLocation location;
        final long bytes;
        final Duration timeout;
        final Admission future;
        /** Let in or given up: off the queue, and no timeout or close touches it again. Read unlocked to skip the lock. */
        volatile boolean settled;
        /** Let in: its bytes count as under way. Set under the lock. */
        volatile boolean letIn;
        /** {@code leave}: takes a request its holder ended off its queue. */
        Waiter(BudgetAccount<?> account, MemoryLocation location, long bytes, Duration timeout, Consumer<Waiter> leave) {
            this.account = account;
            this.location = location;
            this.bytes = bytes;
            this.timeout = timeout;
            // ended by its holder (cancelled, or completed as orTimeout does), the request leaves its queue before its
            // functions run, as it does when let in, timed out or failed at a close: none sees it counted as waiting;
            // let in, and its bytes not taken by its caller yet, it gives them back then
            this.future = new Admission(() -> leave.accept(this));
        }
    }

    private final BudgetLedger<B> ledger;
    private final Map<BudgetAccount<B>, ArrayDeque<Waiter>> queues = new LinkedHashMap<>();

    BudgetWaiters(BudgetLedger<B> ledger) {
        this.ledger = ledger;
    }

    /**
     * The request's future: completed now where nobody waits before it and it fits; failed now where it could never
     * fit (above a limit of its budget, of one above it, or the cap), where the timeout is zero and it does not fit,
     * or where the budget is closed; else queued until it fits, times out or is cancelled.
     */
    Admission request(BudgetAccount<B> account, MemoryLocation location, long bytes, Duration timeout) {
        int l = location.ordinal();
        Waiter waiter;
        ledger.lock().lock();
        try {
            if (account.closed) {
                return Admission.failed(new IllegalStateException("memory budget '" + account.path + "' is closed"));
            }
            long most = ledger.limits().mostEver(account, l);
            if (bytes > most) {
                ledger.countRefusal(account);
                return Admission.failed(new BudgetExceededException(location, bytes, account.path, account.path, "out of "
                        + location + " memory: " + bytes + " bytes are more than memory budget '" + account.path + "' could ever hold at "
                        + location + " (" + most + " bytes, under its limits and those of the budgets above it); no memory given back can make room"));
            }
            ArrayDeque<Waiter> queue = queues.get(account);
            BudgetLimits.Refusal refusal = queue == null ? ledger.limits().refusal(account, l, bytes, BudgetLimits.Pending.COUNTED) : null;
            if (queue == null && refusal == null) {
                ledger.limits().commit(account, l, bytes, true);
                return Admission.now();
            }
            // counted as queued before the stripes' room is taken back: a buffer freed meanwhile on a stripe already
            // passed over brings its bytes to the books, which serve this request once it is queued, rather than park
            // them as room while the request waits
            ledger.queued(1);
            boolean queued = false;
            try {
                // each limit that refuses in turn (the budget's own, then an ancestor's) gives back the room under it
                while (refusal != null && ledger.tree().takeRoomBack(refusal)) {
                    refusal = ledger.limits().refusal(account, l, bytes, BudgetLimits.Pending.COUNTED);
                    if (refusal == null) {
                        ledger.limits().commit(account, l, bytes, true);
                        return Admission.now();
                    }
                }
                if (timeout.isZero()) {
                    return Admission.failed(refusal != null ? ledger.refused(account, refusal, location, bytes, 1) : timedOut(account, location, bytes, timeout));
                }
                waiter = new Waiter(account, location, bytes, timeout, this::withdraw);
                queues.computeIfAbsent(account, key -> new ArrayDeque<>()).addLast(waiter);
                account.waitingRequests++;
                queued = true;
            } finally {
                if (!queued) {
                    ledger.queued(-1);
                }
            }
        } finally {
            ledger.lock().unlock();
        }
        // the JDK's delayer fires the timer, and cancels its task once the request ends otherwise; the timeout runs here
        CompletableFuture<Void> timer = new CompletableFuture<Void>().orTimeout(TimeUnit.NANOSECONDS.convert(timeout), TimeUnit.NANOSECONDS);
        timer.whenCompleteAsync((done, expired) -> {
            if (expired != null) {
                timeOut(waiter);
            }
        }, COMPLETIONS);
        waiter.future.whenComplete((done, failure) -> timer.complete(null));
        return waiter.future;
    }

    /** Under the lock: each queue's heads that fit now, let in (their bytes counted as under way) and off their queue. */
    List<Waiter> serve() {
        if (queues.isEmpty()) {
            return List.of();
        }
        List<Waiter> admitted = new ArrayList<>();
        for (Iterator<Map.Entry<BudgetAccount<B>, ArrayDeque<Waiter>>> each = queues.entrySet().iterator(); each.hasNext(); ) {
            Map.Entry<BudgetAccount<B>, ArrayDeque<Waiter>> entry = each.next();
            BudgetAccount<B> account = entry.getKey();
            ArrayDeque<Waiter> queue = entry.getValue();
            for (Waiter head; (head = queue.peekFirst()) != null; ) {
                int l = head.location.ordinal();
                BudgetLimits.Refusal refusal = ledger.limits().refusal(account, l, head.bytes, BudgetLimits.Pending.COUNTED);
                while (refusal != null && ledger.tree().takeRoomBack(refusal)) {
                    refusal = ledger.limits().refusal(account, l, head.bytes, BudgetLimits.Pending.COUNTED);
                }
                if (refusal != null) {
                    break;
                }
                ledger.limits().commit(account, l, head.bytes, true);
                queue.removeFirst();
                account.waitingRequests--;
                ledger.queued(-1);
                head.letIn = true;
                head.settled = true;
                admitted.add(head);
            }
            if (queue.isEmpty()) {
                each.remove();
            }
        }
        return admitted;
    }

    /**
     * Completes each request let in, on a thread of its own; one its holder ended first gave its bytes back then. Not
     * under the lock.
     */
    void dispatch(List<Waiter> admitted) {
        for (Waiter waiter : admitted) {
            // told without taking the bytes: until its caller takes them, an ending of its holder gives them back
            COMPLETIONS.execute(waiter.future::tell);
        }
    }

    @SuppressWarnings("unchecked") // the waiters of this object are of its ledger's accounts
    private void giveBack(Waiter letIn) {
        ledger.cancel((BudgetAccount<B>) letIn.account, letIn.location, letIn.bytes, BudgetLedger.Claimant.QUEUED_REQUEST);
    }

    /** Under the lock: the requests queued in a closing budget, off their queue, to be failed once the lock is let go. */
    void withdrawAll(BudgetAccount<B> account, List<Waiter> failed) {
        ArrayDeque<Waiter> queue = queues.remove(account);
        if (queue != null) {
            for (Waiter waiter : queue) {
                waiter.settled = true;
                failed.add(waiter);
            }
            account.waitingRequests = 0;
            ledger.queued(-queue.size());
        }
    }

    /** Fails the requests of closed budgets. Not under the lock. */
    void failClosed(List<Waiter> failed) {
        for (Waiter waiter : failed) {
            waiter.future.completeExceptionally(new IllegalStateException("memory budget '" + waiter.account.path
                    + "' was closed while the request waited for room in it"));
        }
    }

    /**
     * A request its holder ended leaves its queue (the next may fit now); one let in whose bytes its caller has not
     * taken gives them back.
     */
    private void withdraw(Waiter waiter) {
        if (!waiter.settled) {
            List<Waiter> admitted = List.of();
            ledger.lock().lock();
            try {
                if (!waiter.settled && remove(waiter)) {
                    admitted = serve();
                }
            } finally {
                ledger.lock().unlock();
            }
            dispatch(admitted);
        }
        if (waiter.letIn && waiter.future.takeBytes(Admission.Taker.HOLDER)) {
            giveBack(waiter);
        }
    }

    /** The timeout passed: a request still queued fails with the budget's refusal as it stands now, counted. */
    private void timeOut(Waiter waiter) {
        BudgetExceededException failure;
        List<Waiter> admitted;
        ledger.lock().lock();
        try {
            if (waiter.settled || !remove(waiter)) {
                return;
            }
            @SuppressWarnings("unchecked") // the waiters of this object are of its ledger's accounts
            BudgetAccount<B> account = (BudgetAccount<B>) waiter.account;
            failure = timedOut(account, waiter.location, waiter.bytes, waiter.timeout);
            admitted = serve();
        } finally {
            ledger.lock().unlock();
        }
        waiter.future.completeExceptionally(failure);
        dispatch(admitted);
    }

    /** Under the lock: takes a queued request off its queue; false where it was not there. */
    private boolean remove(Waiter waiter) {
        ArrayDeque<Waiter> queue = queues.get(waiter.account);
        if (queue == null || !queue.removeFirstOccurrence(waiter)) {
            return false;
        }
        waiter.settled = true;
        waiter.account.waitingRequests--;
        ledger.queued(-1);
        if (queue.isEmpty()) {
            queues.remove(waiter.account);
        }
        return true;
    }

    /** Under the lock: the failure of a request that waited {@code timeout} in vain, counted as the budget's refusal. */
    private BudgetExceededException timedOut(BudgetAccount<B> account, MemoryLocation location, long bytes, Duration timeout) {
        BudgetLimits.Refusal refusal = ledger.limits().refusal(account, location.ordinal(), bytes, BudgetLimits.Pending.COUNTED);
        if (refusal == null) { // it fits now, but earlier requests wait before it: the budget's own queue refused it
            ledger.countRefusal(account);
            return new BudgetExceededException(location, bytes, account.path, account.path, "no room in memory budget '" + account.path
                    + "' for " + bytes + " bytes of " + location + " within the wait of " + timeout.toMillis() + " ms, behind earlier requests, which are served first");
        }
        BudgetExceededException last = ledger.refused(account, refusal, location, bytes, 1);
        BudgetExceededException failure = new BudgetExceededException(location, bytes, last.budget(), last.refusedBy(), "no room in memory budget '"
                + account.path + "' for " + bytes + " bytes of " + location + " within the wait of " + timeout.toMillis() + " ms; the last attempt: "
                + last.getMessage());
        failure.initCause(last);
        return failure;
    }
}
