package dev.compute.memory.budget;

import dev.compute.memory.BudgetReservationException;
import dev.compute.memory.BudgetSpec;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.budget.BudgetLimits.Pending;
import dev.compute.memory.budget.BudgetLimits.Refusal;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.locks.ReentrantLock;
import org.jspecify.annotations.Nullable;

/**
 * The tree of a ledger's budgets: the roots still open and their children, a budget's opening (its reservation checked
 * against every limit above it and the cap) and closing (its whole subtree, the deepest first, each one's room and
 * reservation given back), the manager's close, and the walk that takes back the room the stripes keep under a limit
 * that refused a request. Under the ledger's lock throughout, as the ledger's counts are.
 */
final class BudgetTree<B> {

    private final BudgetLedger<B> ledger;
    private final ReentrantLock lock;
    private final BudgetLimits<B> limits;
    private final BudgetStripes<B> stripes;
    private final BudgetWaiters<B> waiters;
    /**
     * How many levels budgets nest, a root the first: the walks of their books (the stripes' cells, a close, the
     * endpoint's description) go level by level on the stack, and 10,000 levels overflowed it.
     */
    static final int MAX_DEPTH = 100;

    private final List<BudgetAccount<B>> roots = new ArrayList<>();
    private boolean managerClosed;

    BudgetTree(BudgetLedger<B> ledger, BudgetLimits<B> limits, BudgetStripes<B> stripes, BudgetWaiters<B> waiters) {
        this.ledger = ledger;
        this.lock = ledger.lock();
        this.limits = limits;
        this.stripes = stripes;
        this.waiters = waiters;
    }

    /** See {@link BudgetLedger#open}. */
    BudgetAccount<B> open(@Nullable BudgetAccount<B> parent, BudgetSpec spec) {
        lock.lock();
        try {
            if (managerClosed) {
                throw new IllegalStateException("this UnifiedMemoryManager is closed");
            }
            if (parent != null && parent.closed) {
                throw new IllegalStateException("memory budget '" + parent.path + "' is closed: no budget can be made under it");
            }
            if (parent != null && depth(parent) >= MAX_DEPTH) {
                throw new IllegalStateException("memory budget '" + parent.path + "' is " + MAX_DEPTH + " levels deep: no budget can be made"
                        + " under it (budgets nest at most " + MAX_DEPTH + " levels)");
            }
            BudgetAccount<B> account = new BudgetAccount<>(parent, spec);
            long[] reserving = account.reserved.clone();
            Arrays.fill(account.reserved, 0); // counted location by location below, each checked against what the others took
            for (MemoryLocation location : MemoryLocation.values()) {
                int l = location.ordinal();
                if (reserving[l] != 0) {
                    reserve(parent, account, location, reserving[l]);
                }
            }
            for (int l = 0; l < BudgetAccount.LOCATIONS; l++) {
                account.awaitingThePool[l] = account.reserved[l] > 0;
            }
            account.underReservation = (parent != null && parent.underReservation) || Arrays.stream(account.reserved).anyMatch(r -> r > 0);
            (parent == null ? roots : parent.children).add(account);
            return account;
        } finally {
            lock.unlock();
        }
    }

    /** The level {@code account} is at, a root's 1. */
    private static int depth(BudgetAccount<?> account) {
        int depth = 0;
        for (BudgetAccount<?> level = account; level != null; level = level.parent) {
            depth++;
        }
        return depth;
    }

    /** See {@link BudgetLedger#attach}. */
    boolean attach(BudgetAccount<B> account, Object handle) {
        lock.lock();
        try {
            if (account.closed) {
                return false;
            }
            account.attach(handle);
            return true;
        } finally {
            lock.unlock();
        }
    }

    /** See {@link BudgetLedger#reservationsAwaitingThePool}. */
    Map<MemoryLocation, Long> reservationsAwaitingThePool(BudgetAccount<B> account) {
        Map<MemoryLocation, Long> awaiting = new EnumMap<>(MemoryLocation.class);
        lock.lock();
        try {
            for (MemoryLocation location : MemoryLocation.values()) {
                if (account.awaitingThePool[location.ordinal()]) {
                    awaiting.put(location, account.reserved[location.ordinal()]);
                }
            }
        } finally {
            lock.unlock();
        }
        return awaiting;
    }

    /** See {@link BudgetLedger#keptByThePool}. */
    void keptByThePool(BudgetAccount<B> account, MemoryLocation location, boolean kept) {
        lock.lock();
        try {
            account.awaitingThePool[location.ordinal()] = !kept;
        } finally {
            lock.unlock();
        }
    }

    /** See {@link BudgetLedger#reservations}. */
    Map<Object, Long> reservations(MemoryLocation location) {
        if (limits.noneReserving()) {
            return Map.of();
        }
        lock.lock();
        try {
            return Collections.unmodifiableMap(limits.reservations(location.ordinal()));
        } finally {
            lock.unlock();
        }
    }

    /** Under the lock: {@code bytes} of {@code location} reserved for {@code account}, or every reservation it made given back and a refusal thrown. */
    private void reserve(@Nullable BudgetAccount<B> parent, BudgetAccount<B> account, MemoryLocation location, long bytes) {
        int l = location.ordinal();
        if (limits.cap(l) < 0) {
            limits.giveBackReservations(account);
            throw new IllegalArgumentException("memory budget '" + account.path + "' cannot reserve " + location
                    + " memory: this manager has none");
        }
        Refusal refusal = limits.refusal(parent, l, bytes, Pending.COUNTED);
        while (refusal != null && takeRoomBack(refusal)) { // each refusing level in turn, the parent's, then an ancestor's
            refusal = limits.refusal(parent, l, bytes, Pending.COUNTED);
        }
        if (refusal == null && bytes > limits.cap(l)) {
            // the walk leaves a request above the cap to the pool; a reservation is ours. What the budgets count there
            // (the room the stripes keep among it) has no part in this refusal: told, it read as reservations not in use
            limits.giveBackReservations(account);
            throw new BudgetReservationException(location, bytes, "memory budget '" + account.path + "' cannot reserve " + bytes
                    + " bytes of " + location + ": more than the " + limits.cap(l) + " bytes of " + location + " memory ("
                    + limits.capProperty(l) + ") by itself");
        }
        if (refusal != null) {
            limits.giveBackReservations(account);
            throw new BudgetReservationException(location, bytes, "memory budget '" + account.path + "' cannot reserve "
                    + bytes + " bytes of " + location + ": " + (refusal.budget() != null ? "it " : "")
                    + BudgetRefusals.why(refusal, ledger, l, bytes));
        }
        account.reserved[l] = bytes;
        limits.reserve(account, l, bytes);
    }

    /** The handles of the root budgets still open, in the order they were made. */
    List<Object> roots() {
        lock.lock();
        try {
            return handles(roots);
        } finally {
            lock.unlock();
        }
    }

    /** The handles of {@code account}'s children still open, in the order they were made. */
    List<Object> children(BudgetAccount<B> account) {
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

    /** Under the lock: the root budgets still open, for a refusal's message. */
    List<BudgetAccount<B>> rootAccounts() {
        return roots;
    }

    // ---- closing ----------------------------------------------------------------------------------------------------

    /** See {@link BudgetLedger#close}. */
    List<BudgetLedger.Open<B>> close(BudgetAccount<B> account) {
        return close(account, new ArrayList<>());
    }

    /** {@link #close(BudgetAccount)}, adding to {@code closed} every budget this close closed, the deepest first. */
    List<BudgetLedger.Open<B>> close(BudgetAccount<B> account, List<BudgetAccount<B>> closed) {
        List<BudgetLedger.Open<B>> open = new ArrayList<>();
        List<BudgetWaiters.Waiter> failed = new ArrayList<>();
        List<BudgetWaiters.Waiter> admitted;
        lock.lock();
        try {
            if (account.closed) {
                return open;
            }
            closeTree(account, open, failed, closed);
            (account.parent == null ? roots : account.parent.children).remove(account);
            admitted = ledger.roomFreed();
        } finally {
            lock.unlock();
        }
        waiters.failClosed(failed);
        waiters.dispatch(admitted);
        return open;
    }

    /** Under the lock: the children first, so that each reservation given back reaches the parent before it gives back its own. */
    private void closeTree(BudgetAccount<B> account, List<BudgetLedger.Open<B>> open, List<BudgetWaiters.Waiter> failed,
                           List<BudgetAccount<B>> closed) {
        for (BudgetAccount<B> child : account.children) {
            closeTree(child, open, failed, closed);
        }
        closed.add(account);
        account.children.clear();
        account.closed = true; // before the stripes are read: a request let in on one after this sees it
        for (BudgetEntry<B> entry = account.firstMapped; entry != null; entry = entry.next) {
            if (entry.handedOut) { // else its mapFile has not returned it, and closes it on seeing the budget closed
                open.add(new BudgetLedger.Open<>(account.path, account, entry.bytes, true, entry.buffer, null));
            }
        }
        stripes.openBuffers(account, open);
        takeRoomOf(account);
        limits.giveBackReservations(account);
        waiters.withdrawAll(account, failed);
    }

    /** See {@link BudgetLedger#managerClosed}. */
    List<Object> managerClosed(boolean memoryBack) {
        List<BudgetWaiters.Waiter> failed = new ArrayList<>();
        List<BudgetAccount<B>> closed = new ArrayList<>();
        List<Object> closedHandles;
        lock.lock();
        try {
            managerClosed = true;
            // listed before the close clears the children: parents first, level by level
            List<BudgetAccount<B>> levels = new ArrayList<>(roots);
            for (int i = 0; i < levels.size(); i++) {
                levels.addAll(levels.get(i).children);
            }
            closedHandles = handles(levels);
            for (BudgetAccount<B> root : roots) {
                closeTree(root, new ArrayList<>(), failed, closed);
            }
            if (memoryBack) {
                ledger.forgetCounts(); // before the stripes are cleared: a release holding one after this counts nothing
                for (BudgetAccount<B> account : closed) {
                    forget(account);
                }
                limits.forget();
            }
            roots.clear();
            ledger.signalClaims();
        } finally {
            lock.unlock();
        }
        waiters.failClosed(failed);
        return closedHandles;
    }

    /** Under the lock: a budget whose memory went back with the manager's counts nothing, nor does any budget under it. */
    private void forget(BudgetAccount<B> account) {
        stripes.forget(account);
        Arrays.fill(account.direct, 0);
        Arrays.fill(account.content, 0);
        Arrays.fill(account.pending, 0);
        Arrays.fill(account.queuedPending, 0);
        account.mappedFiles = 0;
        account.mappedBytes = 0;
        for (BudgetEntry<B> entry = account.firstMapped; entry != null; entry = entry.next) {
            entry.open = false;
        }
        account.firstMapped = null;
    }

    // ---- the walk (under the lock) ------------------------------------------------------------------------------------

    /**
     * Takes back the room the stripes keep in the budgets under the limit that refused (every budget, for the cap):
     * true where there was any, so that the request is checked again.
     */
    @SuppressWarnings("unchecked") // a refusal names one of this ledger's accounts
    boolean takeRoomBack(Refusal refusal) {
        boolean any = false;
        if (refusal.budget() != null) {
            any = takeRoomUnder((BudgetAccount<B>) refusal.budget());
        } else {
            for (BudgetAccount<B> root : roots) {
                any |= takeRoomUnder(root);
            }
        }
        return any;
    }

    private boolean takeRoomUnder(BudgetAccount<B> account) {
        boolean any = takeRoomOf(account);
        for (BudgetAccount<B> child : account.children) {
            any |= takeRoomUnder(child);
        }
        return any;
    }

    private boolean takeRoomOf(BudgetAccount<B> account) {
        long[] taken = new long[BudgetAccount.LOCATIONS];
        if (stripes.takeRoom(account, taken) == 0) {
            return false;
        }
        for (int l = 0; l < BudgetAccount.LOCATIONS; l++) {
            ledger.uncount(account, l, taken[l]);
        }
        return true;
    }
}
