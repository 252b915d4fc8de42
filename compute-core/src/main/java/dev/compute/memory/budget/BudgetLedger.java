package dev.compute.memory.budget;

import dev.compute.memory.BudgetExceededException;
import dev.compute.memory.BudgetSpec;
import dev.compute.memory.BudgetStatistics;
import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.OutOfMemoryReason;
import dev.compute.memory.resource.Block;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumMap;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import org.jspecify.annotations.Nullable;

/**
 * The books of a manager's budgets: every budget's limits, reservation and figures ({@link BudgetAccount}), the
 * buffers each counts, and, per location, what the root budgets occupy against the location's cap. One lock guards
 * all of it, so that a request is checked against its budget, every budget above it and the cap in one step, and a
 * reading is one state of the books. Nothing under the lock calls out: no pool, no buffer, no user code.
 *
 * <p><b>A request.</b> {@link #claim} counts its bytes as under way in its budget and every ancestor before it goes to
 * the pool, so that requests made at once never pass a limit together; {@link #settle} counts the buffer it got, or
 * {@link #cancel} gives the bytes back when the pool refused. A request that fits beside what is held but not beside
 * requests still under way waits for them (they end within the pool's own bounded waits), so that it is refused only
 * for memory really held; a thread does not wait for its own requests (an out-of-memory handler that allocates through a
 * budget). {@link #released} counts a buffer's memory back, before the pool may lend it again.
 *
 * <p><b>Reservations.</b> The walk up from a budget adds what each level comes to occupy (see {@link BudgetAccount}): a
 * request within a budget's unused reservation changes nothing above it, and the rest is checked against each
 * ancestor's limits and, at the top, against the cap, which every root's occupancy (its reservation, or what it holds
 * where more) shares. So the reservations never add up past the cap, and no budget can take memory that another
 * reserved and does not use. This is accounting above the pool: memory allocated through the manager outside any
 * budget, and the host mirrors of device buffers, are no budget's and take from the pool whatever is reserved.
 *
 * @param <B> the buffer handle kept for each counted buffer
 */
public final class BudgetLedger<B> {

    /** Who waits for a claim's settling: a thread allocating now, or a queued request (served on another thread). */
    public enum Claimant { THIS_THREAD, QUEUED_REQUEST }

    /** A buffer still open in a budget as it closed; {@code budget} is the path of the budget it was allocated through. */
    public record Open<B>(String budget, B buffer, long bytes, boolean mapped) {}

    private final ReentrantLock lock = new ReentrantLock();
    private final Condition requestsSettled = lock.newCondition();
    /** Per location: the cap the root budgets share; -1 where the manager has no such location. */
    private final long[] cap;
    private final String[] capProperty;
    /** Per location: what the roots occupy, and the part of it that requests under way hold. */
    private final long[] occupied = new long[BudgetAccount.LOCATIONS];
    private final long[] pendingAtRoots = new long[BudgetAccount.LOCATIONS];
    private final List<BudgetAccount<B>> roots = new ArrayList<>();
    private final IdentityHashMap<Block, BudgetEntry<B>> byBlock = new IdentityHashMap<>();
    /** Threads with a claim under way, which must not wait for their own. */
    private final List<Thread> requesting = new ArrayList<>();
    private final BudgetWaiters<B> waiters = new BudgetWaiters<>(this);
    private final long settleWaitNanos;
    private int awaitingSettle;
    private boolean managerClosed;
    /** The manager freed its pools as it closed: every count went with them, and nothing under way counts any more. */
    private boolean countsForgotten;
    /** Set once a budget is made: until then a free of the manager's need not look here. */
    private volatile boolean inUse;

    /**
     * Books against {@code caps}, each location's cap (a location missing has none, and no budget may reserve or
     * allocate there), named in messages by {@code capProperties}; a claim waits for requests under way at most
     * {@code settleWait}.
     */
    public BudgetLedger(Map<MemoryLocation, Long> caps, Map<MemoryLocation, String> capProperties, Duration settleWait) {
        this.cap = new long[BudgetAccount.LOCATIONS];
        this.capProperty = new String[BudgetAccount.LOCATIONS];
        for (MemoryLocation location : MemoryLocation.values()) {
            cap[location.ordinal()] = caps.getOrDefault(location, -1L);
            capProperty[location.ordinal()] = capProperties.getOrDefault(location, "the cap");
        }
        this.settleWaitNanos = settleWait.toNanos();
    }

    // ---- budgets ----------------------------------------------------------------------------------------------------

    /**
     * A new budget under {@code parent} (a root where null), holding its reservations from now on. Refused when the
     * parent or the manager is closed, where a reserved location is not the manager's, or where a reservation would
     * pass a limit above it or the cap: then nothing is counted.
     */
    public BudgetAccount<B> open(@Nullable BudgetAccount<B> parent, BudgetSpec spec) {
        lock.lock();
        try {
            if (managerClosed) {
                throw new IllegalStateException("this UnifiedMemoryManager is closed");
            }
            if (parent != null && parent.closed) {
                throw new IllegalStateException("memory budget '" + parent.path + "' is closed: no budget can be made under it");
            }
            BudgetAccount<B> account = new BudgetAccount<>(parent, spec);
            long[] reserving = account.reserved.clone();
            Arrays.fill(account.reserved, 0); // counted location by location below, each checked against what the others took
            for (MemoryLocation location : MemoryLocation.values()) {
                int l = location.ordinal();
                if (reserving[l] == 0) {
                    continue;
                }
                if (cap[l] < 0) {
                    giveBackReservations(account);
                    throw new IllegalArgumentException("memory budget '" + account.path + "' cannot reserve " + location
                            + " memory: this manager has none");
                }
                Refusal refusal = refusal(parent, l, reserving[l], Pending.COUNTED);
                if (refusal != null) {
                    giveBackReservations(account);
                    throw new IllegalStateException("memory budget '" + account.path + "' cannot reserve " + reserving[l] + " bytes of "
                            + location + ": " + (refusal.budget() != null ? "it " : "") + BudgetRefusals.why(refusal, this, l, reserving[l]));
                }
                account.reserved[l] = reserving[l];
                propagate(parent, l, reserving[l]);
            }
            (parent == null ? roots : parent.children).add(account);
            inUse = true;
            return account;
        } finally {
            lock.unlock();
        }
    }

    /** Gives back the reservations counted so far for a budget that could not be made. */
    private void giveBackReservations(BudgetAccount<B> account) {
        for (int l = 0; l < BudgetAccount.LOCATIONS; l++) {
            if (account.reserved[l] > 0) {
                propagate(account.parent, l, -account.reserved[l]);
                account.reserved[l] = 0;
            }
        }
    }

    /** The handles of the root budgets still open, in the order they were made. */
    public List<Object> roots() {
        lock.lock();
        try {
            return handles(roots);
        } finally {
            lock.unlock();
        }
    }

    /** The handles of {@code account}'s children still open, in the order they were made. */
    public List<Object> children(BudgetAccount<B> account) {
        lock.lock();
        try {
            return handles(account.children);
        } finally {
            lock.unlock();
        }
    }

    private List<Object> handles(List<BudgetAccount<B>> accounts) {
        List<Object> handles = new ArrayList<>(accounts.size());
        for (BudgetAccount<B> account : accounts) {
            Object handle = account.handle();
            if (handle != null) {
                handles.add(handle);
            }
        }
        return handles;
    }

    public boolean isClosed(BudgetAccount<B> account) {
        lock.lock();
        try {
            return account.closed;
        } finally {
            lock.unlock();
        }
    }

    /** True once a budget was made: until then no free need look here. */
    public boolean inUse() {
        return inUse;
    }

    // ---- a request --------------------------------------------------------------------------------------------------

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
        boolean waited = false; // the clock is read only once there is something to wait for (a read is a visible part of a pair)
        lock.lock();
        try {
            while (true) {
                requireOpen(account);
                Refusal refusal = refusal(account, l, bytes, Pending.COUNTED);
                if (refusal == null) {
                    commit(account, l, bytes);
                    requesting.add(self);
                    return;
                }
                if (!waited) {
                    waitUntil = System.nanoTime() + settleWaitNanos;
                    waited = true;
                }
                long left = waitUntil - System.nanoTime();
                if (left <= 0 || requesting.contains(self) || refusal(account, l, bytes, Pending.IGNORED) != null) {
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
     * under way, as by {@link #claim}; the caller then settles or cancels them. Requests waiting in one budget are
     * served in the order they came. See {@link BudgetWaiters}.
     */
    public CompletableFuture<Void> claimLater(BudgetAccount<B> account, MemoryLocation location, long bytes, Duration timeout) {
        return waiters.request(account, location, bytes, timeout);
    }

    /**
     * Counts a claim's buffer from now until its memory goes back ({@link #released}), looked up by {@code block}.
     * False where the budget closed meanwhile: nothing is counted, and the caller closes the buffer.
     */
    public boolean settle(BudgetAccount<B> account, MemoryLocation location, Claimant claimant, B buffer, Block block, long bytes) {
        int l = location.ordinal();
        boolean counted;
        List<BudgetWaiters.Waiter> admitted = List.of();
        lock.lock();
        try {
            settled(account, l, bytes, claimant);
            counted = !account.closed;
            if (counted) {
                count(account, l, buffer, block, bytes);
            } else {
                uncount(account, l, bytes);
                admitted = roomFreed();
            }
        } finally {
            lock.unlock();
        }
        waiters.dispatch(admitted);
        return counted;
    }

    /** {@link #settle} for the buffers of a batch, claimed together: all of them are counted, or none. */
    public boolean settleAll(BudgetAccount<B> account, MemoryLocation location, Claimant claimant, List<B> buffers, List<Block> blocks, long[] bytes) {
        int l = location.ordinal();
        long total = 0;
        for (long each : bytes) {
            total += each;
        }
        boolean counted;
        List<BudgetWaiters.Waiter> admitted = List.of();
        lock.lock();
        try {
            settled(account, l, total, claimant);
            counted = !account.closed;
            if (counted) {
                for (int i = 0; i < buffers.size(); i++) {
                    count(account, l, buffers.get(i), blocks.get(i), bytes[i]);
                }
            } else {
                uncount(account, l, total);
                admitted = roomFreed();
            }
        } finally {
            lock.unlock();
        }
        waiters.dispatch(admitted);
        return counted;
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
     * Counts a mapped file from now until it is unmapped ({@link #released}), apart from the limits. False where the
     * budget is closed: nothing is counted, and the caller closes the buffer.
     */
    public boolean settleMapped(BudgetAccount<B> account, B buffer, Block mapping, long bytes) {
        lock.lock();
        try {
            if (account.closed) {
                return false;
            }
            for (BudgetAccount<B> x = account; x != null; x = x.parent) {
                x.mappedFiles++;
                x.mappedBytes += bytes;
            }
            BudgetEntry<B> entry = new BudgetEntry<>(account, buffer, MemoryLocation.HOST.ordinal(), bytes, true);
            account.link(entry);
            byBlock.put(mapping, entry);
            return true;
        } finally {
            lock.unlock();
        }
    }

    /** The memory over {@code block} went back (or the file was unmapped): its budget, if any, counts it no more. */
    public void released(Block block) {
        List<BudgetWaiters.Waiter> admitted = List.of();
        lock.lock();
        try {
            BudgetEntry<B> entry = byBlock.remove(block);
            if (entry != null) {
                entry.account.unlink(entry);
                admitted = entry.mapped ? unmapped(entry) : freed(entry);
            }
        } finally {
            lock.unlock();
        }
        waiters.dispatch(admitted);
    }

    private List<BudgetWaiters.Waiter> unmapped(BudgetEntry<B> entry) {
        for (BudgetAccount<B> x = entry.account; x != null; x = x.parent) {
            x.mappedFiles--;
            x.mappedBytes -= entry.bytes;
        }
        return List.of();
    }

    private List<BudgetWaiters.Waiter> freed(BudgetEntry<B> entry) {
        for (BudgetAccount<B> x = entry.account; x != null; x = x.parent) {
            x.allocated[entry.location] -= entry.bytes;
            x.allocatedInAll -= entry.bytes;
            x.liveBuffers--;
        }
        uncount(entry.account, entry.location, entry.bytes);
        return roomFreed();
    }

    // ---- closing ----------------------------------------------------------------------------------------------------

    /**
     * Closes {@code account} and every budget under it: each refuses further requests, its waiting requests fail, its
     * reservation goes back; it counts its buffers until their memory is back. Returns the buffers still counted, for
     * the caller to close (some may be closed already, their memory waiting for a view). Closing twice returns nothing.
     */
    public List<Open<B>> close(BudgetAccount<B> account) {
        List<Open<B>> open = new ArrayList<>();
        List<BudgetWaiters.Waiter> failed = new ArrayList<>();
        List<BudgetWaiters.Waiter> admitted;
        lock.lock();
        try {
            if (account.closed) {
                return open;
            }
            closeTree(account, open, failed, new ArrayList<>());
            (account.parent == null ? roots : account.parent.children).remove(account);
            admitted = roomFreed();
        } finally {
            lock.unlock();
        }
        waiters.failClosed(failed);
        waiters.dispatch(admitted);
        return open;
    }

    /** Under the lock: the children first, so that each reservation given back reaches the parent before it gives back its own. */
    private void closeTree(BudgetAccount<B> account, List<Open<B>> open, List<BudgetWaiters.Waiter> failed, List<BudgetAccount<B>> closed) {
        for (BudgetAccount<B> child : account.children) {
            closeTree(child, open, failed, closed);
        }
        closed.add(account);
        account.children.clear();
        account.closed = true;
        for (BudgetEntry<B> entry = account.firstOpen; entry != null; entry = entry.next) {
            open.add(new Open<>(account.path, entry.buffer, entry.bytes, entry.mapped));
        }
        for (int l = 0; l < BudgetAccount.LOCATIONS; l++) {
            if (account.reserved[l] > 0) {
                long before = account.occupied(l);
                account.reserved[l] = 0;
                propagate(account.parent, l, account.occupied(l) - before);
            }
        }
        waiters.withdrawAll(account, failed);
    }

    /**
     * The manager closed, after closing every buffer: every budget is closed. Where it freed its pools
     * ({@code memoryBack}) their memory went back with everything, so nothing counts any more; where it kept them,
     * what the buffers held stays counted.
     */
    public void managerClosed(boolean memoryBack) {
        List<BudgetWaiters.Waiter> failed = new ArrayList<>();
        lock.lock();
        try {
            managerClosed = true;
            List<BudgetAccount<B>> closed = new ArrayList<>();
            for (BudgetAccount<B> root : roots) {
                closeTree(root, new ArrayList<>(), failed, closed);
            }
            if (memoryBack) {
                countsForgotten = true;
                closed.forEach(BudgetLedger::forget);
            }
            roots.clear();
            if (memoryBack) {
                byBlock.clear();
                Arrays.fill(occupied, 0);
                Arrays.fill(pendingAtRoots, 0);
            }
            if (awaitingSettle > 0) {
                requestsSettled.signalAll();
            }
        } finally {
            lock.unlock();
        }
        waiters.failClosed(failed);
    }

    /** Under the lock: a budget whose memory went back with the manager's counts nothing, nor does any budget under it. */
    private static <B> void forget(BudgetAccount<B> account) {
        Arrays.fill(account.direct, 0);
        Arrays.fill(account.content, 0);
        Arrays.fill(account.allocated, 0);
        Arrays.fill(account.pending, 0);
        account.allocatedInAll = 0;
        account.liveBuffers = 0;
        account.mappedFiles = 0;
        account.mappedBytes = 0;
        account.firstOpen = null;
    }

    // ---- figures ----------------------------------------------------------------------------------------------------

    public BudgetStatistics statistics(BudgetAccount<B> account) {
        lock.lock();
        try {
            Map<MemoryLocation, BudgetStatistics.Location> locations = new EnumMap<>(MemoryLocation.class);
            for (MemoryLocation location : MemoryLocation.values()) {
                int l = location.ordinal();
                if (account.used[l] || account.reserved[l] > 0 || account.locationLimit[l] < account.limit) {
                    locations.put(location, new BudgetStatistics.Location(account.locationLimit[l], account.reserved[l],
                            account.allocated[l], account.locationPeak[l]));
                }
            }
            return new BudgetStatistics(account.path, account.limit, account.allocatedInAll, account.peak, account.liveBuffers,
                    account.allocations, account.refusals, account.reservedInAll(), account.waitingRequests, account.mappedFiles,
                    account.mappedBytes, locations);
        } finally {
            lock.unlock();
        }
    }

    // ---- the walk (under the lock) ------------------------------------------------------------------------------------

    /** Whether requests under way count in a check: they do, except when asking whether waiting for them could help. */
    enum Pending { COUNTED, IGNORED }

    /** What refused a request: a budget's limit at all or at the location, or (budget null) the cap the roots share. */
    record Refusal(@Nullable BudgetAccount<?> budget, boolean atLocation) {}

    /**
     * The first limit, from {@code from} up to the cap, that {@code bytes} more at {@code l} would pass; null where
     * they fit. Each level is checked for what the level below comes to occupy.
     */
    @Nullable Refusal refusal(@Nullable BudgetAccount<B> from, int l, long bytes, Pending pending) {
        long more = bytes;
        for (BudgetAccount<B> x = from; x != null && more > 0; x = x.parent) {
            long content = x.content[l] - (pending == Pending.COUNTED ? 0 : x.pending[l]);
            long inAll = x.contentInAll() - (pending == Pending.COUNTED ? 0 : x.pendingInAll());
            if (more > x.locationLimit[l] - content) {
                return new Refusal(x, x.locationLimit[l] < x.limit);
            }
            if (more > x.limit - inAll) {
                return new Refusal(x, false);
            }
            more = Math.max(x.reserved[l], content + more) - Math.max(x.reserved[l], content);
        }
        long roots = occupied[l] - (pending == Pending.COUNTED ? 0 : pendingAtRoots[l]);
        return more > 0 && more > cap[l] - roots ? new Refusal(null, true) : null;
    }

    /** The most {@code account} could ever hold at {@code l}, whatever comes back: its limits, its ancestors' and the cap. */
    long mostEver(BudgetAccount<B> account, int l) {
        long most = Math.max(0, cap[l]);
        for (BudgetAccount<B> x = account; x != null; x = x.parent) {
            most = Math.min(most, x.locationLimit[l]);
        }
        return most;
    }

    /** Counts a claim's bytes as under way from {@code account} up. */
    void commit(BudgetAccount<B> account, int l, long bytes) {
        account.direct[l] += bytes;
        for (BudgetAccount<B> x = account; x != null; x = x.parent) {
            x.pending[l] += bytes;
        }
        pendingAtRoots[l] += bytes;
        propagate(account, l, bytes);
    }

    /** A claim's bytes are under way no more (counted as allocated next, or given back). */
    private void settled(BudgetAccount<B> account, int l, long bytes, Claimant claimant) {
        if (claimant == Claimant.THIS_THREAD) {
            requesting.remove(Thread.currentThread());
        }
        if (countsForgotten) {
            return;
        }
        for (BudgetAccount<B> x = account; x != null; x = x.parent) {
            x.pending[l] -= bytes;
        }
        pendingAtRoots[l] -= bytes;
        if (awaitingSettle > 0) {
            requestsSettled.signalAll();
        }
    }

    /** Bytes a request through {@code account} held count no more, from it up to the cap. */
    private void uncount(BudgetAccount<B> account, int l, long bytes) {
        if (countsForgotten) {
            return;
        }
        account.direct[l] -= bytes;
        propagate(account, l, -bytes);
    }

    /** Counts a buffer as allocated from {@code account} up, and keeps it, found by its block. */
    private void count(BudgetAccount<B> account, int l, B buffer, Block block, long bytes) {
        countAllocated(account, l, bytes);
        BudgetEntry<B> entry = new BudgetEntry<>(account, buffer, l, bytes, false);
        account.link(entry);
        byBlock.put(block, entry);
    }

    private void countAllocated(BudgetAccount<B> account, int l, long bytes) {
        for (BudgetAccount<B> x = account; x != null; x = x.parent) {
            x.allocated[l] += bytes;
            x.allocatedInAll += bytes;
            x.used[l] = true;
            x.locationPeak[l] = Math.max(x.locationPeak[l], x.allocated[l]);
            x.peak = Math.max(x.peak, x.allocatedInAll);
            x.liveBuffers++;
            x.allocations++;
        }
    }

    void countRefusal(BudgetAccount<B> account) {
        for (BudgetAccount<B> x = account; x != null; x = x.parent) {
            x.refusals++;
        }
    }

    /** Adds {@code delta} to the content of {@code x} and what each level comes to occupy to the level above, up to the cap. */
    private void propagate(@Nullable BudgetAccount<B> x, int l, long delta) {
        long change = delta;
        for (; x != null && change != 0; x = x.parent) {
            long before = x.occupied(l);
            x.content[l] += change;
            change = x.occupied(l) - before;
        }
        if (x == null) {
            occupied[l] += change;
        }
    }

    /** Under the lock, where memory was given back: waiters that fit now, to be dispatched once it is let go; signals claims. */
    private List<BudgetWaiters.Waiter> roomFreed() {
        if (awaitingSettle > 0) {
            requestsSettled.signalAll();
        }
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

    long cap(int l) {
        return cap[l];
    }

    String capProperty(int l) {
        return capProperty[l];
    }

    long occupied(int l) {
        return occupied[l];
    }

    List<BudgetAccount<B>> rootAccounts() {
        return roots;
    }
}
