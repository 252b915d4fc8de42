package dev.compute.memory.budget;

import static dev.compute.memory.budget.BudgetCells.ALL;
import static dev.compute.memory.budget.BudgetCells.ALLOCATIONS;
import static dev.compute.memory.budget.BudgetCells.BUFFERS;
import static dev.compute.memory.budget.BudgetCells.KEEP;
import static dev.compute.memory.budget.BudgetCells.PEAK_ROOM;
import static dev.compute.memory.budget.BudgetCells.ROOM;
import static dev.compute.memory.budget.BudgetCells.USED;

import dev.compute.memory.internal.StripedLongs;
import dev.compute.memory.internal.ThreadStripes;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * The books of a ledger's budgets kept per thread stripe ({@link ThreadStripes}), so that a request through a budget
 * that fits in the room its stripe holds ({@link BudgetCells}) takes one atomic step (holding the stripe) however deep
 * the budget is, and giving it back one more: the budget's bytes, buffers and peaks are counted at every level on the
 * thread's own cache lines, and the ledger's lock is not taken. A request the room cannot hold goes to the ledger,
 * which counts it against every limit; its buffer's bytes come to the room when it is freed.
 *
 * <p><b>Holding.</b> A thread holds one stripe at a time and takes no lock while it holds one, so the ledger (under its
 * lock) may hold stripes one after the other; reading figures, and a request that may raise a peak, hold them all,
 * in order. A hold is a compare-and-set on the stripe's own line and a release store to let go, as
 * {@code StripedByteCounters} holds its stripes. Finding a stripe held moves no thread: a request that may raise a
 * peak holds other threads' stripes for a moment, and a move it caused would send the thread to a stripe without room
 * or headroom, whose next request would hold them all and move the next one; the manager's call gate moves threads
 * that really share a stripe.
 *
 * <p><b>Peaks.</b> Each figure's peak is what its stripes hold plus their headroom below it ({@code PEAK_ROOM}). A
 * request that its own stripe's headroom covers at every level cannot pass a peak and takes it from there; any other
 * is counted holding every stripe, where what the budget holds is one state: the headroom of the other stripes is
 * taken, or the peak rises to what is held then, no further. So a peak is exactly the most ever held at once, and a
 * budget at one location has the same peak there as in all.
 */
final class BudgetStripes<B> {

    private static final int HELD = 0;

    private final StripedLongs holds = new StripedLongs();
    private final BudgetLedger<B> ledger;

    BudgetStripes(BudgetLedger<B> ledger) {
        this.ledger = ledger;
    }

    // ---- holding ----------------------------------------------------------------------------------------------------

    void hold(int stripe) {
        for (int spins = 0; holds.compareAndExchange(stripe, HELD, 0, 1) != 0; spins++) {
            if (spins < 64) {
                Thread.onSpinWait();
            } else {
                Thread.yield(); // the holder was descheduled
            }
        }
    }

    void letGo(int stripe) {
        holds.setRelease(stripe, HELD, 0);
    }

    /** Holds every stripe, in order (no thread holding one waits for another, so this cannot deadlock). */
    private void holdAll() {
        for (int s = 0; s < ThreadStripes.COUNT; s++) {
            hold(s);
        }
    }

    private void letGoAll() {
        for (int s = ThreadStripes.COUNT - 1; s >= 0; s--) {
            letGo(s);
        }
    }

    /** Under {@code stripe}'s hold: the budget's books on it, made on first use (and its ancestors', which they lead up to). */
    static <B> BudgetCells<B> cells(BudgetAccount<B> account, int stripe) {
        BudgetCells<B> cells = account.cells[stripe];
        if (cells == null) {
            cells = new BudgetCells<>(account.parent == null ? null : cells(account.parent, stripe));
            account.cells[stripe] = cells;
        }
        return cells;
    }

    // ---- a request --------------------------------------------------------------------------------------------------

    /**
     * A buffer of {@code bytes} at location {@code l} through {@code account}, from its stripe's room: counted from now.
     * Null where the room is short or the budget is closed: then the ledger decides.
     */
    @Nullable BudgetNode<B> take(BudgetAccount<B> account, int l, long bytes) {
        int stripe = ThreadStripes.ofCurrentThread();
        hold(stripe);
        try {
            BudgetCells<B> cells = account.cells[stripe];
            if (cells == null || cells.books[ROOM + l] < bytes || account.closed) {
                return null;
            }
            if (countInHeadroom(cells, account.keepMost[l], l, bytes, 1)) {
                return taken(account, cells, stripe, l, bytes);
            }
        } finally {
            letGo(stripe);
        }
        holdAll(); // a peak may rise: counted where what the budget holds is one state
        try {
            BudgetCells<B> cells = account.cells[stripe];
            if (cells == null || cells.books[ROOM + l] < bytes || account.closed) {
                return null;
            }
            countHoldingAll(account, cells, stripe, l, bytes, 1);
            return taken(account, cells, stripe, l, bytes);
        } finally {
            letGoAll();
        }
    }

    /** Under the stripe's hold, the request counted: takes its bytes from the room and links its node. */
    private BudgetNode<B> taken(BudgetAccount<B> account, BudgetCells<B> cells, int stripe, int l, long bytes) {
        BudgetNode<B> node = cells.reuse(l, bytes);
        if (node == null) {
            node = new BudgetNode<>(account, l, bytes, stripe); // the first few only: then the spares of those whose memory came back
        }
        cells.books[ROOM + l] -= bytes;
        cells.link(node);
        node.open = true;
        node.handedOut = false;
        node.requester = Thread.currentThread();
        return node;
    }

    /** {@link #take} for the buffers of a batch, all from the room or none. */
    BudgetNode<B> @Nullable [] takeAll(BudgetAccount<B> account, int l, long[] bytes, long total) {
        int stripe = ThreadStripes.ofCurrentThread();
        return countAll(account, stripe, l, nodes(account, stripe, l, bytes, null), total, From.ROOM);
    }

    /**
     * Counts buffers the ledger let in (their bytes counted against the limits already), each with its buffer. Null,
     * counting nothing, where the budget closed meanwhile: the caller gives the bytes back and closes the buffers.
     */
    BudgetNode<B> @Nullable [] counted(BudgetAccount<B> account, int l, B[] buffers, long[] bytes, long total) {
        int stripe = ThreadStripes.ofCurrentThread();
        return countAll(account, stripe, l, nodes(account, stripe, l, bytes, buffers), total, From.LEDGER);
    }

    /** Where the bytes of buffers being counted come from: the stripe's room, or the ledger, which counted them already. */
    private enum From { ROOM, LEDGER }

    @SuppressWarnings("unchecked") // an array of nodes of this ledger's handle
    private BudgetNode<B>[] nodes(BudgetAccount<B> account, int stripe, int l, long[] bytes, B @Nullable [] buffers) {
        BudgetNode<B>[] nodes = new BudgetNode[bytes.length];
        for (int i = 0; i < bytes.length; i++) {
            nodes[i] = new BudgetNode<>(account, l, bytes[i], stripe);
            if (buffers != null) {
                nodes[i].buffer(buffers[i]);
            }
        }
        return nodes;
    }

    /** Counts {@code nodes} ({@code total} bytes) at every level and links them; null where the room is short or the budget closed. */
    private BudgetNode<B> @Nullable [] countAll(BudgetAccount<B> account, int stripe, int l, BudgetNode<B>[] nodes, long total, From from) {
        hold(stripe);
        try {
            BudgetCells<B> cells = admitted(account, stripe, l, total, from);
            if (cells == null) {
                return null;
            }
            if (countInHeadroom(cells, account.keepMost[l], l, total, nodes.length)) {
                return linked(cells, l, nodes, total, from);
            }
        } finally {
            letGo(stripe);
        }
        holdAll(); // a peak may rise: counted where what the budget holds is one state
        try {
            BudgetCells<B> cells = admitted(account, stripe, l, total, from);
            if (cells == null) {
                return null;
            }
            countHoldingAll(account, cells, stripe, l, total, nodes.length);
            return linked(cells, l, nodes, total, from);
        } finally {
            letGoAll();
        }
    }

    /** Under the stripe's hold: the budget's books there, or null where the room is short or the budget closed. */
    private @Nullable BudgetCells<B> admitted(BudgetAccount<B> account, int stripe, int l, long total, From from) {
        if (account.closed) {
            return null;
        }
        if (from == From.LEDGER) {
            return cells(account, stripe);
        }
        BudgetCells<B> cells = account.cells[stripe];
        return cells == null || cells.books[ROOM + l] < total ? null : cells;
    }

    /** Under the stripe's hold, the buffers counted: takes their bytes from the room where they come from it, and links their nodes. */
    private BudgetNode<B>[] linked(BudgetCells<B> cells, int l, BudgetNode<B>[] nodes, long total, From from) {
        if (from == From.ROOM) {
            cells.books[ROOM + l] -= total;
        }
        for (BudgetNode<B> node : nodes) {
            cells.link(node);
            node.open = true;
            node.handedOut = false;
            node.requester = from == From.ROOM ? Thread.currentThread() : null;
        }
        return nodes;
    }

    /**
     * A counted buffer's memory went back ({@code failed}: its request failed in the pool, so it was no allocation):
     * it counts no more, and its bytes go to its stripe's room, up to what the room keeps. Returns the bytes the ledger
     * takes back at {@code l}, the node's location as the caller read it before (the node may be taken again for
     * another request as soon as the stripe is let go): the rest, or all of them where the budget is closed or a
     * request waits for room there.
     */
    long release(BudgetNode<B> node, int l, boolean failed) {
        int stripe = node.stripe;
        BudgetAccount<B> account = node.account;
        hold(stripe);
        try {
            if (!node.open || ledger.countsForgotten()) { // twice, or the manager forgot every count
                return 0;
            }
            node.open = false;
            BudgetCells<B> cells = account.cells[stripe];
            cells.unlink(node);
            node.buffer(null);
            node.requester = null; // a spare keeps no thread reachable
            if (!account.closed) { // a closed budget's nodes may still be waited on by its close: never taken again
                cells.keep(node);
            }
            long bytes = node.bytes;
            for (BudgetCells<B> at = cells; at != null; at = at.up) {
                long[] books = at.books;
                books[USED + l] -= bytes;
                books[BUFFERS]--;
                books[ALLOCATIONS] -= failed ? 1 : 0;
                books[PEAK_ROOM + l] += bytes;
                books[PEAK_ROOM + ALL] += bytes;
            }
            if (account.closed || ledger.wantsRoomBack()) {
                return bytes;
            }
            long[] own = cells.books;
            long room = own[ROOM + l] + bytes;
            long back = Math.max(0, room - own[KEEP + l]);
            own[ROOM + l] = room - back;
            return back;
        } finally {
            letGo(stripe);
        }
    }

    /**
     * Under the stripe's hold: counts {@code buffers} buffers of {@code bytes} in all at every level from {@code own} (a
     * budget's books on the stripe) up, within each level's headroom below its peaks, and raises what the room keeps, to
     * {@code keepMost} at most. False, counting nothing, where a level's headroom on this stripe is short: a peak may
     * rise, or the headroom is on other stripes, and the request is counted holding them all ({@link #countHoldingAll}).
     */
    private static boolean countInHeadroom(BudgetCells<?> own, long keepMost, int l, long bytes, int buffers) {
        for (BudgetCells<?> at = own; at != null; at = at.up) {
            long[] books = at.books;
            if (books[PEAK_ROOM + l] < bytes || books[PEAK_ROOM + ALL] < bytes) {
                for (BudgetCells<?> below = own; below != at; below = below.up) {
                    count(below.books, l, -bytes, -buffers);
                }
                return false;
            }
            count(books, l, bytes, buffers);
        }
        keep(own, keepMost, l, bytes);
        return true;
    }

    /** Counts {@code buffers} buffers of {@code bytes} at one level, taking them from the headroom below its peaks (negative: undoes it). */
    private static void count(long[] books, int l, long bytes, int buffers) {
        books[USED + l] += bytes;
        books[BUFFERS] += buffers;
        books[ALLOCATIONS] += buffers;
        books[PEAK_ROOM + l] -= bytes;
        books[PEAK_ROOM + ALL] -= bytes;
    }

    /** Raises what the room on {@code own}'s stripe keeps to about twice the largest request there, to {@code keepMost} at most. */
    private static void keep(BudgetCells<?> own, long keepMost, int l, long bytes) {
        own.books[KEEP + l] = Math.min(Math.max(own.books[KEEP + l], Math.min(bytes, Long.MAX_VALUE / 2) * 2), keepMost);
    }

    /**
     * Holding every stripe: {@link #countInHeadroom} for a request that its stripe's headroom does not cover. At each
     * level and figure whose headroom on {@code stripe} is short, what the budget holds is summed over the stripes: the
     * peak rises to it where it is more, and the headroom left is what lies between the two, taken from this stripe
     * first, so that threads working alike keep the headroom each needs rather than take it from each other in turns
     * (as {@code StripedByteCounters} collects).
     */
    private static <B> void countHoldingAll(BudgetAccount<B> account, BudgetCells<B> own, int stripe, int l, long bytes, int buffers) {
        BudgetCells<B> at = own;
        for (BudgetAccount<B> x = account; x != null; x = x.parent, at = at.up) {
            long[] books = at.books;
            books[USED + l] += bytes;
            books[BUFFERS] += buffers;
            books[ALLOCATIONS] += buffers;
            settlePeak(x, at, stripe, l, bytes);
            settlePeak(x, at, stripe, ALL, bytes);
        }
        keep(own, account.keepMost[l], l, bytes);
    }

    /** Holding every stripe, {@code bytes} just counted at {@code x} on {@code stripe} ({@code at}, its books there): its peak of figure {@code index}. */
    private static <B> void settlePeak(BudgetAccount<B> x, BudgetCells<B> at, int stripe, int index, long bytes) {
        if (at.books[PEAK_ROOM + index] >= bytes) {
            at.books[PEAK_ROOM + index] -= bytes;
            return;
        }
        long held = 0;
        long headroom = 0;
        for (int s = 0; s < ThreadStripes.COUNT; s++) {
            BudgetCells<B> cells = x.cells[s];
            if (cells != null) {
                held += index == ALL ? cells.usedInAll() : cells.books[USED + index];
                headroom += cells.books[PEAK_ROOM + index];
            }
        }
        long peak = Math.max(x.peaks[index], held);
        x.peaks[index] = peak;
        long excess = headroom - (peak - held); // bytes at most: what this request takes, less any rise of the peak
        if (excess < 0) { // stripes' books forgotten with the pools' memory
            at.books[PEAK_ROOM + index] -= excess;
        }
        for (int n = 0, s = stripe; n < ThreadStripes.COUNT && excess > 0; n++, s = (s + 1) & (ThreadStripes.COUNT - 1)) {
            BudgetCells<B> cells = x.cells[s];
            if (cells != null) {
                long taken = Math.clamp(cells.books[PEAK_ROOM + index], 0, excess);
                cells.books[PEAK_ROOM + index] -= taken;
                excess -= taken;
            }
        }
    }

    // ---- what the ledger does with the stripes (under its lock) -------------------------------------------------------

    /** Takes back the room every stripe holds for {@code account} at each location into {@code taken}; returns the sum. */
    long takeRoom(BudgetAccount<B> account, long[] taken) {
        long sum = 0;
        for (int s = 0; s < ThreadStripes.COUNT; s++) {
            hold(s);
            BudgetCells<B> cells = account.cells[s];
            if (cells != null) {
                for (int l = 0; l < BudgetAccount.LOCATIONS; l++) {
                    taken[l] += cells.books[ROOM + l];
                    sum += cells.books[ROOM + l];
                    cells.books[ROOM + l] = 0;
                }
            }
            letGo(s);
        }
        return sum;
    }

    /**
     * Whether {@code node}'s request is still under way: counted, and its buffer not yet given. False once the buffer
     * came, or once the pool refused the request (a closed budget's nodes are never taken again, so this stays false).
     * False too for a request of the asking thread itself (a close from its out-of-memory handler or listener): it
     * cannot go on while its thread waits, and sees the budget closed as it counts its buffer, closing it itself.
     */
    boolean underWay(BudgetNode<B> node) {
        int stripe = node.stripe;
        hold(stripe);
        try {
            return node.open && node.buffer() == null && node.requester != Thread.currentThread();
        } finally {
            letGo(stripe);
        }
    }

    /** {@link #handOut(List, List)} for one request's one buffer: the common allocation's, with no list made for it. */
    boolean handOut(BudgetNode<B> node, B buffer) {
        hold(node.stripe);
        try {
            node.buffer(buffer);
            node.handedOut = !node.account.closed;
            return node.handedOut;
        } finally {
            letGo(node.stripe);
        }
    }

    /**
     * Hands the buffers of {@code nodes} (one request's, on one stripe; {@code buffers} null where the nodes have them
     * already) to their caller, all or none: false where the budget closed, whose close then leaves them to the request.
     * Under the stripe's hold, so that a close sees each either handed out or not, as its request does.
     */
    boolean handOut(List<BudgetNode<B>> nodes, @Nullable List<B> buffers) {
        int stripe = nodes.get(0).stripe;
        hold(stripe);
        try {
            boolean open = !nodes.get(0).account.closed;
            for (int i = 0; i < nodes.size(); i++) {
                if (buffers != null) {
                    nodes.get(i).buffer(buffers.get(i));
                }
                nodes.get(i).handedOut = open;
            }
            return open;
        } finally {
            letGo(stripe);
        }
    }

    /**
     * Adds the open buffers of {@code account} itself (not those under it) to {@code open}: with its buffer, one its
     * caller was handed; else with its node, a request under way, or one that sees the close as its buffer comes.
     */
    void openBuffers(BudgetAccount<B> account, List<BudgetLedger.Open<B>> open) {
        for (int s = 0; s < ThreadStripes.COUNT; s++) {
            hold(s);
            BudgetCells<B> cells = account.cells[s];
            for (BudgetNode<B> node = cells == null ? null : cells.first; node != null; node = node.next) {
                B buffer = node.handedOut ? node.buffer() : null;
                open.add(new BudgetLedger.Open<>(account.path, account, node.bytes, false, buffer, buffer == null ? node : null));
            }
            letGo(s);
        }
    }

    /** The manager freed its pools: every count of {@code account} is gone with them, and no node counts any more. */
    void forget(BudgetAccount<B> account) {
        for (int s = 0; s < ThreadStripes.COUNT; s++) {
            hold(s);
            BudgetCells<B> cells = account.cells[s];
            if (cells != null) {
                for (BudgetNode<B> node = cells.first; node != null; node = node.next) {
                    node.open = false;
                }
                account.forgottenAllocations += cells.books[ALLOCATIONS]; // buffers ever allocated: a count that never goes back
                account.cells[s] = null;
            }
            letGo(s);
        }
    }

    /** What {@code account} holds now, read holding every stripe at once (in order), so that it is one state. */
    Figures figures(BudgetAccount<B> account) {
        long[] used = new long[BudgetAccount.LOCATIONS];
        long buffers = 0;
        long allocations = account.forgottenAllocations;
        long[] peaks;
        holdAll();
        try {
            for (int s = 0; s < ThreadStripes.COUNT; s++) {
                BudgetCells<B> cells = account.cells[s];
                if (cells != null) {
                    for (int l = 0; l < BudgetAccount.LOCATIONS; l++) {
                        used[l] += cells.books[USED + l];
                    }
                    buffers += cells.books[BUFFERS];
                    allocations += cells.books[ALLOCATIONS];
                }
            }
            peaks = account.peaks.clone();
        } finally {
            letGoAll();
        }
        long inAll = 0;
        for (long bytes : used) {
            inAll += bytes;
        }
        return new Figures(used, inAll, peaks, buffers, allocations);
    }

    /** One budget's figures, from its stripes: bytes held per location and in all, peaks (per location, then all), buffers. */
    record Figures(long[] used, long usedInAll, long[] peaks, long buffers, long allocations) {}
}
