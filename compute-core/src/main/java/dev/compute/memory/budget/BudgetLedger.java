package dev.compute.memory.budget;

import dev.compute.memory.BudgetExceededException;
import dev.compute.memory.BudgetSpec;
import dev.compute.memory.BudgetStatistics;
import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.OutOfMemoryReason;
import dev.compute.memory.budget.BudgetLimits.Pending;
import dev.compute.memory.budget.BudgetLimits.Refusal;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;

/**
 * The books of a manager's budgets: every budget's limits and reservation ({@link BudgetAccount}) and, per location,
 * what the root budgets occupy against the location's cap, under one lock, so that a request is checked against its
 * budget, every budget above it and the cap in one step; and, per thread stripe ({@link BudgetStripes}), each budget's
 * figures, open buffers and the room it keeps for its next requests. The budgets' tree, their opening and closing, and
 * the walk that takes back the room kept under a limit are {@link BudgetTree}'s, under the same lock. Nothing under the
 * lock calls out: no pool, no buffer, no user code.
 *
 * <p><b>A request.</b> One that fits in the room its stripe keeps for its budget is let in there, without the lock
 * ({@link #take}): those bytes are counted against every limit already. Else {@link #claim} counts its bytes as under
 * way in its budget and every ancestor before it goes to the pool, so that requests made at once never pass a limit
 * together; {@link #settled} counts the buffer it got, or {@link #failed} gives the bytes back when the pool refused.
 * A request that would pass a limit first takes back the room the stripes keep under that limit (so parked room never
 * refuses anyone); one that then fits beside what is held but not beside requests still under way waits for them
 * (they end within the pool's own bounded waits), so that it is refused only for memory really held; a thread does not
 * wait for its own requests (an out-of-memory handler that allocates through a budget), nor for requests let in from a
 * budget's queue ({@link #claimLater}), which may wait for the pool's room as long as their callers allow.
 * {@link #released} counts a buffer's memory back once the pool has it: to its stripe's room, the rest to the books.
 *
 * <p><b>Reservations</b> ({@link BudgetLimits}): a budget's reservation counts in its parent, and a root's at the cap, from
 * the moment it is made, so reservations never add up past the cap and no budget can take memory another reserved and
 * does not use. The pool keeps that room too, in memory rather than bytes asked for ({@link #reservations},
 * {@link #reservingBudget}): a reserving budget's requests take memory kept apart for it, and no other request grows the
 * pool into a reservation beyond what that memory holds, whoever makes it (a neighbour, memory allocated outside any
 * budget, the host mirrors of device buffers), since a buffer costs the pool more than the bytes its books count.
 *
 * @param <B> the buffer handle kept for each counted buffer
 */
public final class BudgetLedger<B> {

    /** Who waits for a claim's settling: a thread allocating now, or a queued request (served on another thread). */
    public enum Claimant { THIS_THREAD, QUEUED_REQUEST }

    /**
     * A buffer still counted in a budget as it closed: {@code budget} is the path of the budget it was allocated
     * through; {@code buffer} is null for a request still under way in the pool, whose {@code node} gets it.
     */
    public record Open<B>(String budget, BudgetAccount<B> account, long bytes, boolean mapped, @Nullable B buffer, @Nullable BudgetNode<B> node) {}

    private final ReentrantLock lock = new ReentrantLock();
    private static final Object UNMARKED = new Object();
    private static final Object NO_REQUESTER = new Object();
    /** The budget whose request the calling thread is making to the pool, where it reserves memory (see {@link #markRequestOf}). */
    private final ThreadLocal<@Nullable BudgetAccount<B>> requester = new ThreadLocal<>();
    private final Condition requestsSettled = lock.newCondition();
    private final BudgetLimits<B> limits;
    /** Threads with a claim under way, which must not wait for their own. */
    private final List<Thread> requesting = new ArrayList<>();
    private final BudgetStripes<B> stripes = new BudgetStripes<>(this);
    private final BudgetWaiters<B> waiters = new BudgetWaiters<>(this);
    private final BudgetTree<B> tree;
    private final long settleWaitNanos;
    /** Claims waiting for requests under way, and requests queued for room: while any, freed bytes come back here. */
    private volatile int awaitingSettle;
    private volatile int queuedRequests;
    /** The manager freed its pools: every count went with them, and nothing under way counts any more. */
    private volatile boolean countsForgotten;

    /**
     * Books against {@code caps}, each location's cap (a location missing has none, and no budget may reserve or
     * allocate there), named in messages by {@code capProperties}; a claim waits for requests under way at most
     * {@code settleWait}.
     */
    public BudgetLedger(Map<MemoryLocation, Long> caps, Map<MemoryLocation, String> capProperties, Duration settleWait) {
        this(caps, caps, capProperties, settleWait);
    }

    /**
     * As {@link #BudgetLedger(Map, Map, Duration)}, where the pool of a location can never hold a request above
     * {@code largestPossible} (its cap in the whole pieces it takes memory in): one above it is left to the pool to
     * refuse, as one above the cap is.
     */
    public BudgetLedger(Map<MemoryLocation, Long> caps, Map<MemoryLocation, Long> largestPossible, Map<MemoryLocation, String> capProperties,
                        Duration settleWait) {
        this.limits = new BudgetLimits<>(caps, largestPossible, capProperties);
        this.settleWaitNanos = settleWait.toNanos();
        this.tree = new BudgetTree<>(this, limits, stripes, waiters);
    }

    // ---- budgets ----------------------------------------------------------------------------------------------------

    /**
     * A new budget under {@code parent} (a root where null), holding its reservations from now on. Refused when the
     * parent or the manager is closed, where a reserved location is not the manager's, or where a reservation would
     * pass a limit above it or the cap (after taking back the room kept under them): then nothing is counted.
     */
    public BudgetAccount<B> open(@Nullable BudgetAccount<B> parent, BudgetSpec spec) {
        return tree.open(parent, spec);
    }

    /**
     * Ties the public handle to {@code account}, made whole, so that a close from now on tells it; false where a close
     * came first (its parent's or the manager's), which closed the account without it: no one holds it then.
     */
    public boolean attach(BudgetAccount<B> account, Object handle) {
        return tree.attach(account, handle);
    }

    /**
     * The reservations of {@code account}, just opened, that the pool is yet to keep room for, by location. Until
     * {@link #keptByThePool}, {@link #reservations} leaves them out (a child's, from the room of the budget above it).
     */
    public Map<MemoryLocation, Long> reservationsAwaitingThePool(BudgetAccount<B> account) {
        return tree.reservationsAwaitingThePool(account);
    }

    /**
     * Whether the pool keeps room for {@code account}'s reservation at {@code location} from now on ({@code kept}: it is
     * among {@link #reservations}), or not (yet), as {@link #reservationsAwaitingThePool} left it.
     */
    public void keptByThePool(BudgetAccount<B> account, MemoryLocation location, boolean kept) {
        tree.keptByThePool(account, location, kept);
    }

    /** The handles of the root budgets still open, in the order they were made. */
    public List<Object> roots() {
        return tree.roots();
    }

    /** The handles of {@code account}'s children still open, in the order they were made. */
    public List<Object> children(BudgetAccount<B> account) {
        return tree.children(account);
    }

    public boolean isClosed(BudgetAccount<B> account) {
        return account.closed;
    }

    // ---- a request --------------------------------------------------------------------------------------------------

    /**
     * A buffer of {@code bytes} at {@code location} through {@code account} from the room its thread's stripe keeps,
     * counted from now; null where the room is short (or the budget closed): then {@link #claim}. The caller hands the
     * node to the buffer it gets ({@link #settled}), or to {@link #failed} where the pool refused.
     */
    public @Nullable BudgetNode<B> take(BudgetAccount<B> account, MemoryLocation location, long bytes) {
        return stripes.take(account, location.ordinal(), bytes);
    }

    /** {@link #take} for a batch, all of it from the room or none. */
    public BudgetNode<B> @Nullable [] takeAll(BudgetAccount<B> account, MemoryLocation location, long[] bytes, long total) {
        return stripes.takeAll(account, location.ordinal(), bytes, total);
    }

    /** A request let in from the room got its buffer: false where the budget closed meanwhile (the caller closes it). */
    public boolean settled(BudgetNode<B> node, B buffer) {
        return stripes.handOut(node, buffer);
    }

    /** {@link #settled} for a batch, all of it handed out or none (a close never reports half a batch as held). */
    public boolean settledAll(BudgetNode<B>[] nodes, List<B> buffers) {
        return stripes.handOut(Arrays.asList(nodes), buffers);
    }

    /**
     * Buffers the ledger let in ({@link #settleAll}), carrying their nodes, go to their caller: false where the budget
     * closed meanwhile, whose close then left them to the caller to close.
     */
    public boolean handedOut(BudgetNode<B>[] nodes) {
        return stripes.handOut(Arrays.asList(nodes), null);
    }

    /**
     * Whether the request {@code node} counts (one {@link Open} of a closing budget names) is still under way in the
     * pool: false once its buffer came ({@link BudgetNode#buffer()}) or once the pool refused it, so that a close
     * waits for nothing that will not come.
     */
    public boolean underWay(BudgetNode<B> node) {
        return stripes.underWay(node);
    }

    /** A request let in from the room failed in the pool: it counts no more, and was no allocation. */
    public void failed(BudgetNode<B> node) {
        int l = node.location; // read first: once released, the node may serve another request
        giveBack(node.account, l, stripes.release(node, l, true));
    }

    /**
     * Counts {@code bytes} at {@code location} as under way in {@code account} and its ancestors, waiting a bounded
     * time for requests under way where they alone stand in the way; {@code buffers} is how many buffers the bytes
     * are for (a batch), for the message.
     *
     * @throws BudgetExceededException where a limit or the cap refuses them
     * @throws IllegalStateException   where the budget is closed
     */
    public void claim(BudgetAccount<B> account, MemoryLocation location, long bytes, int buffers) {
        int l = location.ordinal();
        Thread self = Thread.currentThread();
        long waitUntil = 0;
        boolean waited = false; // the clock is read only once there is something to wait for
        lock.lock();
        try {
            while (true) {
                requireOpen(account);
                Refusal refusal = limits.refusal(account, l, bytes, Pending.COUNTED);
                if (refusal == null) {
                    limits.commit(account, l, bytes, false);
                    requesting.add(self);
                    return;
                }
                if (tree.takeRoomBack(refusal)) {
                    continue;
                }
                if (!waited) {
                    waitUntil = System.nanoTime() + settleWaitNanos;
                    waited = true;
                }
                long left = waitUntil - System.nanoTime();
                if (left <= 0 || requesting.contains(self) || limits.refusal(account, l, bytes, Pending.IGNORED) != null) {
                    throw refused(account, refusal, location, bytes, buffers);
                }
                awaitingSettle++;
                try {
                    requestsSettled.awaitNanos(left);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    countRefusal(account);
                    throw new DeviceOutOfMemoryException(location, bytes, OutOfMemoryReason.BUDGET_LIMIT, "interrupted while memory budget '"
                            + account.path + "' waited for requests under way to see whether " + bytes + " bytes fit its limits");
                } finally {
                    awaitingSettle--;
                }
            }
        } finally {
            lock.unlock();
        }
    }

    /**
     * {@code bytes} at {@code location} for {@code account}, now or once memory counted in the budgets comes back,
     * within {@code timeout}: the future completes (on another thread where it waited) when the bytes are counted as
     * under way, as by {@link #claim}; the caller then takes them ({@link Admission#takeBytes}) and settles or cancels them,
     * or, its holder ending first, they go back. Requests waiting in one budget are
     * served in the order they came. See {@link BudgetWaiters}.
     */
    public Admission claimLater(BudgetAccount<B> account, MemoryLocation location, long bytes, Duration timeout) {
        return waiters.request(account, location, bytes, timeout);
    }

    /**
     * Counts the buffers a claim got (one, or a batch claimed together) from now until their memory goes back
     * ({@link #released} with each one's node, which the buffer carries): all of them, or, where the budget closed
     * meanwhile, none, and null: the caller closes them. Once the buffers carry their nodes, {@link #handedOut} says
     * whether they go to the caller.
     */
    public BudgetNode<B> @Nullable [] settleAll(BudgetAccount<B> account, MemoryLocation location, Claimant claimant, B[] buffers, long[] bytes) {
        int l = location.ordinal();
        long total = 0;
        for (long each : bytes) {
            total += each;
        }
        lock.lock();
        try {
            settled(account, l, total, claimant);
        } finally {
            lock.unlock();
        }
        BudgetNode<B>[] nodes = account.closed ? null : stripes.counted(account, l, buffers, bytes, total);
        if (nodes == null) {
            giveBack(account, l, total);
        }
        return nodes;
    }

    /** A claim whose request failed or was given up: its bytes count no more. */
    public void cancel(BudgetAccount<B> account, MemoryLocation location, long bytes, Claimant claimant) {
        int l = location.ordinal();
        List<BudgetWaiters.Waiter> admitted;
        lock.lock();
        try {
            settled(account, l, bytes, claimant);
            uncount(account, l, bytes);
            admitted = roomFreed();
        } finally {
            lock.unlock();
        }
        waiters.dispatch(admitted);
    }

    /**
     * Counts a mapped file from now until it is unmapped ({@link #released} with the entry returned), apart from the
     * limits. Null where the budget is closed: nothing is counted, and the caller closes the buffer.
     */
    public @Nullable BudgetEntry<B> settleMapped(BudgetAccount<B> account, B buffer, long bytes) {
        lock.lock();
        try {
            if (account.closed) {
                return null;
            }
            account.countMapped(1, bytes);
            BudgetEntry<B> entry = new BudgetEntry<>(account, buffer, bytes);
            account.link(entry);
            return entry;
        } finally {
            lock.unlock();
        }
    }

    /**
     * The mapped buffer of {@code entry} goes to its caller: false where its budget closed meanwhile, whose close then
     * neither reported it nor closed it, leaving that to the caller, as for a buffer of pooled memory ({@link #settled}).
     */
    public boolean handOutMapped(BudgetEntry<B> entry) {
        lock.lock();
        try {
            if (entry.account.closed) {
                return false;
            }
            entry.handedOut = true;
            return true;
        } finally {
            lock.unlock();
        }
    }

    /** The memory of the buffer that carries {@code counted} (a node or an entry) went back, or its file was unmapped. */
    @SuppressWarnings("unchecked") // what a buffer carries is its ledger's
    public void released(Object counted) {
        if (counted instanceof BudgetNode<?> node) {
            BudgetNode<B> mine = (BudgetNode<B>) node;
            int l = mine.location; // read first: once released, the node may serve another request
            giveBack(mine.account, l, stripes.release(mine, l, false));
        } else if (counted instanceof BudgetEntry<?> entry) {
            unmapped((BudgetEntry<B>) entry);
        }
    }

    private void unmapped(BudgetEntry<B> entry) {
        lock.lock();
        try {
            if (!entry.open) {
                return;
            }
            entry.open = false;
            entry.account.unlink(entry);
            entry.account.countMapped(-1, entry.bytes);
        } finally {
            lock.unlock();
        }
    }

    /** Bytes a budget's stripe does not keep as room count no more, from it up to the cap; requests waiting may fit now. */
    private void giveBack(BudgetAccount<B> account, int l, long bytes) {
        if (bytes == 0) {
            return;
        }
        List<BudgetWaiters.Waiter> admitted;
        lock.lock();
        try {
            uncount(account, l, bytes);
            admitted = roomFreed();
        } finally {
            lock.unlock();
        }
        waiters.dispatch(admitted);
    }

    // ---- closing ----------------------------------------------------------------------------------------------------

    /**
     * Closes {@code account} and every budget under it: each refuses further requests, its waiting requests fail, its
     * room and reservation go back; it counts its buffers until their memory is back. Returns the buffers still
     * counted, the deepest budgets' first, for the caller to close (some may be closed already, their memory waiting
     * for a view; some still under way in the pool). Closing twice returns nothing.
     */
    public List<Open<B>> close(BudgetAccount<B> account) {
        return tree.close(account);
    }

    /**
     * {@link #close(BudgetAccount)}, then tells {@code closedHandle} the handle of every budget it closed (this one and
     * those under it, the deepest first), once the books are let go.
     */
    public List<Open<B>> close(BudgetAccount<B> account, Consumer<Object> closedHandle) {
        List<BudgetAccount<B>> closed = new ArrayList<>();
        List<Open<B>> open = tree.close(account, closed);
        for (BudgetAccount<B> each : closed) {
            Object handle = each.handle();
            if (handle != null) {
                closedHandle.accept(handle);
            }
        }
        return open;
    }

    /**
     * The manager closed, after closing every buffer: every budget is closed. Where it freed its pools
     * ({@code memoryBack}) their memory went back with everything, so nothing counts any more; where it kept them,
     * what the buffers held stays counted. Returns the handles of the budgets it closed, parents first, level by level.
     */
    public List<Object> managerClosed(boolean memoryBack) {
        return tree.managerClosed(memoryBack);
    }

    // ---- figures ----------------------------------------------------------------------------------------------------

    /**
     * Each outermost budget reserving memory at {@code location} (the key {@link #reservingBudget} gives its requests), with
     * its reservation. Takes the lock only where a budget reserves.
     */
    public Map<Object, Long> reservations(MemoryLocation location) {
        return tree.reservations(location);
    }

    /**
     * The budget whose reservation at {@code location} the calling thread's request is made under ({@link #markRequestOf}):
     * the outermost at or above the requesting one that reserves memory there, the key of {@link #reservations}; null
     * for anyone else's request. The pool serves it from memory kept apart for that budget. No thread-local is read while
     * no budget reserves; the reservations are read without the lock (a budget opening or closing meanwhile is answered
     * as it was or as it is).
     */
    public @Nullable Object reservingBudget(MemoryLocation location) {
        if (limits.noneReserving()) {
            return null;
        }
        BudgetAccount<B> requesting = requester.get();
        return requesting == null ? null : BudgetLimits.outermostReserving(requesting, location.ordinal());
    }

    /**
     * Marks the calling thread's requests to the pool, until {@link #unmarkRequest}, as {@code account}'s, where it or a
     * budget above it reserves memory: what they have not used of it is then within the request's reach, and the pool
     * serves them from memory kept apart for reservations. Returns what {@link #unmarkRequest} restores (a request made
     * from an out-of-memory handler inside another's).
     */
    public Object markRequestOf(BudgetAccount<B> account) {
        if (!account.underReservation) {
            return UNMARKED;
        }
        BudgetAccount<B> before = requester.get();
        requester.set(account);
        return before == null ? NO_REQUESTER : before;
    }

    /**
     * Lifts the calling thread's mark until {@link #unmarkRequest} with what this returns: code run inside a budget's
     * pool call (an out-of-memory handler) makes requests of its own, which must leave that budget's reservation aside.
     */
    public Object suspendRequest() {
        BudgetAccount<B> before = requester.get();
        if (before == null) {
            return UNMARKED;
        }
        requester.remove();
        return before;
    }

    /**
     * Whether all that {@code account}, or a budget above it, holds at {@code location} (a request under way counted
     * from the moment it is let in) lies within that budget's reservation: the pool keeps that room from every request
     * but theirs, so one of theirs takes nothing another waits for.
     */
    public boolean withinReservation(BudgetAccount<B> account, MemoryLocation location) {
        if (!account.underReservation) {
            return false;
        }
        lock.lock();
        try {
            return limits.withinReservation(account, location.ordinal());
        } finally {
            lock.unlock();
        }
    }

    /** Ends what {@link #markRequestOf} began, with what it returned. */
    @SuppressWarnings("unchecked") // a token of requesting's: one of the two markers, or a budget of this ledger
    public void unmarkRequest(Object token) {
        if (token == NO_REQUESTER) {
            requester.remove();
        } else if (token != UNMARKED) {
            requester.set((BudgetAccount<B>) token);
        }
    }

    public BudgetStatistics statistics(BudgetAccount<B> account) {
        lock.lock();
        try {
            return account.statistics(stripes.figures(account));
        } finally {
            lock.unlock();
        }
    }

    /** Under the lock: what {@code account} holds in buffers, for a refusal's message. */
    @SuppressWarnings("unchecked") // every account a message names is this ledger's
    BudgetStripes.Figures figures(BudgetAccount<?> account) {
        return stripes.figures((BudgetAccount<B>) account);
    }

    // ---- under the lock ---------------------------------------------------------------------------------------------

    /** A claim's bytes are under way no more (counted as a buffer's next, or given back). */
    private void settled(BudgetAccount<B> account, int l, long bytes, Claimant claimant) {
        if (claimant == Claimant.THIS_THREAD) {
            requesting.remove(Thread.currentThread());
        }
        if (countsForgotten) {
            return;
        }
        limits.underWayNoMore(account, l, bytes, claimant == Claimant.QUEUED_REQUEST);
        if (awaitingSettle > 0) {
            requestsSettled.signalAll();
        }
    }

    /** Bytes let in through {@code account} count no more, from it up to the cap. */
    void uncount(BudgetAccount<B> account, int l, long bytes) {
        if (!countsForgotten && bytes != 0) {
            limits.uncount(account, l, bytes);
        }
    }

    void countRefusal(BudgetAccount<B> account) {
        for (BudgetAccount<B> x = account; x != null; x = x.parent) {
            x.refusals++;
        }
    }

    /** Under the lock, where memory was given back: waiters that fit now, to be dispatched once it is let go; signals claims. */
    List<BudgetWaiters.Waiter> roomFreed() {
        signalClaims();
        return waiters.serve();
    }

    BudgetExceededException refused(BudgetAccount<B> account, Refusal refusal, MemoryLocation location, long bytes, int buffers) {
        countRefusal(account);
        return BudgetRefusals.exceeded(account, refusal, this, location, bytes, buffers);
    }

    private void requireOpen(BudgetAccount<B> account) {
        if (account.closed) {
            throw new IllegalStateException("memory budget '" + account.path + "' is closed");
        }
    }

    // ---- for the messages and the waiters (under the lock) ----------------------------------------------------------

    ReentrantLock lock() {
        return lock;
    }

    /** True while freed bytes should come back to the books at once: a claim or a queued request waits for room. */
    boolean wantsRoomBack() {
        return awaitingSettle + queuedRequests > 0;
    }

    boolean countsForgotten() {
        return countsForgotten;
    }

    /** The waiters' queues hold {@code delta} more requests (or fewer). */
    void queued(int delta) {
        queuedRequests += delta;
    }

    BudgetLimits<B> limits() {
        return limits;
    }

    BudgetTree<B> tree() {
        return tree;
    }

    /** The manager freed its pools: from now on nothing counts, and nothing under way does any more. */
    void forgetCounts() {
        countsForgotten = true;
    }

    /** Wakes the claims waiting for requests under way. */
    void signalClaims() {
        if (awaitingSettle > 0) {
            requestsSettled.signalAll();
        }
    }
}
