package dev.compute.memory.budget;

import dev.compute.memory.MemoryLocation;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * The walk that checks bytes against a budget, every budget above it and the cap, and counts them where they fit: the
 * limits' half of a {@link BudgetLedger}, under its lock. Each level is checked for what the level below comes to
 * occupy (see {@link BudgetAccount}), so a request within a budget's unused reservation changes nothing above it, and
 * the rest meets each ancestor's limits and, at the top, the cap every root's occupancy shares.
 */
final class BudgetLimits<B> {

    /** Whether requests under way count in a check: they do, except when asking whether waiting for them could help. */
    enum Pending { COUNTED, IGNORED }

    /** What refused a request: a budget's limit at all or at the location, or (budget null) the cap the roots share. */
    record Refusal(@Nullable BudgetAccount<?> budget, boolean atLocation) {}

    /** Per location: the cap the root budgets share; -1 where the manager has no such location. */
    private final long[] cap = new long[BudgetAccount.LOCATIONS];
    private final String[] capProperty = new String[BudgetAccount.LOCATIONS];
    /** Per location: what the roots occupy, and the part of it that requests under way hold. */
    private final long[] occupied = new long[BudgetAccount.LOCATIONS];
    private final long[] pendingAtRoots = new long[BudgetAccount.LOCATIONS];
    /** Per location: the part of {@link #pendingAtRoots} that queued requests hold (see {@link BudgetAccount#queuedPending}). */
    private final long[] queuedPendingAtRoots = new long[BudgetAccount.LOCATIONS];

    /** Per location: the largest request the pool could ever hold, the cap in its whole pieces; at most the cap. */
    private final long[] largestPossible = new long[BudgetAccount.LOCATIONS];
    /** The budgets open with a reservation, and how many (read without the lock: none is the common case). */
    private final List<BudgetAccount<B>> reserving = new ArrayList<>();
    private volatile int reservingCount;

    BudgetLimits(Map<MemoryLocation, Long> caps, Map<MemoryLocation, String> capProperties) {
        this(caps, caps, capProperties);
    }

    BudgetLimits(Map<MemoryLocation, Long> caps, Map<MemoryLocation, Long> largestPossible, Map<MemoryLocation, String> capProperties) {
        for (MemoryLocation location : MemoryLocation.values()) {
            cap[location.ordinal()] = caps.getOrDefault(location, -1L);
            this.largestPossible[location.ordinal()] = Math.min(cap[location.ordinal()], largestPossible.getOrDefault(location, Long.MAX_VALUE));
            capProperty[location.ordinal()] = capProperties.getOrDefault(location, "the cap");
        }
    }

    /**
     * The first limit, from {@code from} up to the cap, that {@code bytes} more at {@code l} would pass; null where
     * they fit.
     */
    @Nullable Refusal refusal(@Nullable BudgetAccount<B> from, int l, long bytes, Pending pending) {
        long more = bytes;
        for (BudgetAccount<B> x = from; x != null && more > 0; x = x.parent) {
            long content = x.content[l] - (pending == Pending.COUNTED ? 0 : x.pending[l] - x.queuedPending[l]);
            long inAll = x.contentInAll() - (pending == Pending.COUNTED ? 0 : x.pendingInAll() - x.queuedPendingInAll());
            if (more > x.locationLimit[l] - content) {
                return new Refusal(x, x.locationLimit[l] < x.limit);
            }
            if (more > x.limit - inAll) {
                return new Refusal(x, false);
            }
            more = Math.max(x.reserved[l], content + more) - Math.max(x.reserved[l], content);
        }
        if (bytes > largestPossible[l]) {
            // above the cap by itself (in the pool's pieces): no budget's memory coming back could make room, so the pool
            // refuses it with its own message (AllocationAboveLimitException, naming the cap's property), as it would
            // outside a budget
            return null;
        }
        long roots = occupied[l] - (pending == Pending.COUNTED ? 0 : pendingAtRoots[l] - queuedPendingAtRoots[l]);
        return more > 0 && more > cap[l] - roots ? new Refusal(null, true) : null;
    }

    /** The most {@code account} could ever hold at {@code l}, whatever comes back: its limits and its ancestors'. */
    long mostEver(BudgetAccount<B> account, int l) {
        long most = Long.MAX_VALUE;
        for (BudgetAccount<B> x = account; x != null; x = x.parent) {
            most = Math.min(most, x.locationLimit[l]);
        }
        return most;
    }

    /** Counts the bytes of a claim ({@code queued}: of a request let in from a budget's queue) as under way from {@code account} up. */
    void commit(BudgetAccount<B> account, int l, long bytes, boolean queued) {
        account.direct[l] += bytes;
        for (BudgetAccount<B> x = account; x != null; x = x.parent) {
            x.pending[l] += bytes;
            x.queuedPending[l] += queued ? bytes : 0;
        }
        pendingAtRoots[l] += bytes;
        queuedPendingAtRoots[l] += queued ? bytes : 0;
        propagate(account, l, bytes);
    }

    /** A claim's bytes are under way no more (a buffer's next, or given back), {@code queued} as it was committed. */
    void underWayNoMore(BudgetAccount<B> account, int l, long bytes, boolean queued) {
        for (BudgetAccount<B> x = account; x != null; x = x.parent) {
            x.pending[l] -= bytes;
            x.queuedPending[l] -= queued ? bytes : 0;
        }
        pendingAtRoots[l] -= bytes;
        queuedPendingAtRoots[l] -= queued ? bytes : 0;
    }

    /** Bytes let in through {@code account} count no more, from it up to the cap. */
    void uncount(BudgetAccount<B> account, int l, long bytes) {
        account.direct[l] -= bytes;
        propagate(account, l, -bytes);
    }

    /** Counts a reservation of {@code bytes} at {@code l} in the budgets above {@code account} (or gives it back, negative). */
    void reserve(BudgetAccount<B> account, int l, long bytes) {
        propagate(account.parent, l, bytes);
        if (!reserving.contains(account)) {
            reserving.add(account);
            reservingCount = reserving.size();
        }
    }

    /** A closing budget's reservations go back to its parent or the cap. */
    void giveBackReservations(BudgetAccount<B> account) {
        if (reserving.remove(account)) {
            reservingCount = reserving.size();
        }
        for (int l = 0; l < BudgetAccount.LOCATIONS; l++) {
            if (account.reserved[l] > 0) {
                long before = account.occupied(l);
                account.reserved[l] = 0;
                propagate(account.parent, l, account.occupied(l) - before);
            }
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

    /** The manager's memory went back with its pools: nothing counts at the cap any more. */
    void forget() {
        reserving.clear();
        reservingCount = 0;
        Arrays.fill(occupied, 0);
        Arrays.fill(pendingAtRoots, 0);
        Arrays.fill(queuedPendingAtRoots, 0);
    }

    long cap(int l) {
        return cap[l];
    }

    /** Whether no budget open has a reservation: read without the lock. */
    boolean noneReserving() {
        return reservingCount == 0;
    }

    /**
     * Each outermost budget that reserves memory at {@code l}, with what it keeps there: the larger of its own reservation
     * and those of the reserving budgets inside it together (each counts in the content of the budgets above it, so a
     * child may reserve more than its parent; the parent stands for both, its requests and theirs taking the same memory).
     */
    Map<BudgetAccount<B>, Long> reservations(int l) {
        List<BudgetAccount<B>> deepestFirst = new ArrayList<>();
        for (BudgetAccount<B> account : reserving) {
            if (account.reserved[l] > 0 && !account.awaitingThePool[l]) {
                deepestFirst.add(account);
            }
        }
        deepestFirst.sort((a, b) -> Integer.compare(depth(b), depth(a))); // each whole before the one above counts it
        Map<BudgetAccount<B>, Long> inside = new IdentityHashMap<>();
        Map<BudgetAccount<B>, Long> outermost = new IdentityHashMap<>();
        for (BudgetAccount<B> account : deepestFirst) {
            long kept = Math.max(account.reserved[l], inside.getOrDefault(account, 0L));
            BudgetAccount<B> above = account.parent == null ? null : nearestReserving(account.parent, l);
            if (above == null) {
                outermost.put(account, kept);
            } else {
                inside.merge(above, kept, Long::sum);
            }
        }
        return outermost;
    }

    private static <B> int depth(BudgetAccount<B> account) {
        int depth = 0;
        for (BudgetAccount<B> x = account.parent; x != null; x = x.parent) {
            depth++;
        }
        return depth;
    }

    /** The nearest budget at or above {@code account} that reserves memory at {@code l}; null where none does. */
    private static <B> @Nullable BudgetAccount<B> nearestReserving(BudgetAccount<B> account, int l) {
        for (BudgetAccount<B> x = account; x != null; x = x.parent) {
            if (x.reserved[l] > 0) {
                return x;
            }
        }
        return null;
    }

    /** The outermost budget at or above {@code account} that reserves memory at {@code l}; null where none does. */
    static <B> @Nullable BudgetAccount<B> outermostReserving(BudgetAccount<B> account, int l) {
        BudgetAccount<B> found = null;
        for (BudgetAccount<B> x = account; x != null; x = x.parent) {
            if (x.reserved[l] > 0) {
                found = x;
            }
        }
        return found;
    }

    /** See {@link BudgetLedger#withinReservation}. */
    boolean withinReservation(BudgetAccount<B> account, int l) {
        for (BudgetAccount<B> x = account; x != null; x = x.parent) {
            if (x.reserved[l] > 0 && x.content[l] <= x.reserved[l]) {
                return true;
            }
        }
        return false;
    }

    String capProperty(int l) {
        return capProperty[l];
    }

    long occupied(int l) {
        return occupied[l];
    }
}
