package dev.compute.memory.budget;

import org.jspecify.annotations.Nullable;

/**
 * One budget's books on one thread stripe ({@link BudgetStripes}): plain fields, written only by the thread holding
 * the stripe, so that an allocation through a budget takes one atomic step however deep the budget is. A budget's
 * figure is the sum over its stripes.
 *
 * <p>{@code room} is memory the ledger already counts against the budget (and every budget above it) that no buffer
 * holds: a request that fits in its stripe's room is let in without the ledger. A freed buffer's bytes go back to the
 * room, up to {@code keep} (about twice the largest request seen on the stripe); the rest goes back to the ledger, and
 * a request the ledger would refuse first takes every room back, so parked room never refuses anyone.
 * {@code peakRoom} is the figures' headroom below the peak, as in {@code StripedByteCounters}: at every moment the
 * bytes held plus the headroom of every stripe make the peak, so a peak stays exact at the cost of one subtraction.
 */
final class BudgetCells<B> {

    private static final int LOCATIONS = BudgetAccount.LOCATIONS;
    /** The index of the figures of all locations together, after one per location. */
    static final int ALL = LOCATIONS;

    // Where each figure lies in the books: one array, so that counting a request at a level touches one object.
    static final int ROOM = 0;
    static final int KEEP = LOCATIONS;
    /** Bytes of buffers counted here, through this budget and every budget under it, per location. */
    static final int USED = 2 * LOCATIONS;
    /** Per location, then {@link #ALL}. */
    static final int PEAK_ROOM = 3 * LOCATIONS;
    static final int BUFFERS = 4 * LOCATIONS + 1;
    static final int ALLOCATIONS = 4 * LOCATIONS + 2;

    final long[] books = new long[4 * LOCATIONS + 3];
    /** The parent budget's books on the same stripe (null for a root): a request counts at every level along it. */
    final @Nullable BudgetCells<B> up;
    /** The open buffers allocated on this stripe through this budget itself. */
    @Nullable BudgetNode<B> first;
    /** Nodes whose buffers' memory is back, for the next requests here: a list through {@code next}, at most {@link #SPARES}. */
    @Nullable BudgetNode<B> spare;
    int spares;

    BudgetCells(@Nullable BudgetCells<B> up) {
        this.up = up;
    }

    /** How many spare nodes a stripe keeps for a budget. */
    static final int SPARES = 16;

    /** A spare node for a buffer of {@code bytes} at {@code location}, or null where there is none. */
    @Nullable BudgetNode<B> reuse(int location, long bytes) {
        BudgetNode<B> node = spare;
        if (node != null) {
            spare = node.next;
            spares--;
            node.next = null;
            node.location = location;
            node.bytes = bytes;
        }
        return node;
    }

    /** Keeps a node whose buffer's memory is back (unlinked, its buffer forgotten) for the next request here. */
    void keep(BudgetNode<B> node) {
        if (spares < SPARES) {
            node.next = spare;
            spare = node;
            spares++;
        }
    }

    void link(BudgetNode<B> node) {
        node.next = first;
        if (first != null) {
            first.previous = node;
        }
        first = node;
    }

    void unlink(BudgetNode<B> node) {
        if (node.previous != null) {
            node.previous.next = node.next;
        } else if (first == node) {
            first = node.next;
        }
        if (node.next != null) {
            node.next.previous = node.previous;
        }
        node.previous = null;
        node.next = null;
    }

    long usedInAll() {
        long sum = 0;
        for (int l = 0; l < LOCATIONS; l++) {
            sum += books[USED + l];
        }
        return sum;
    }
}
