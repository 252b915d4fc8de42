package dev.compute.memory.budget;

import dev.compute.memory.BudgetExceededException;
import dev.compute.memory.MemoryLocation;
import java.util.ArrayList;
import java.util.List;

/**
 * The messages of a budget's refusal, as the manager's out-of-memory message says what the pool holds: which budget
 * refused, the limit, and what it counts against it (held, being allocated, reserved by the budgets under it), or, at
 * the cap, what the budgets together count and which reservations stand in the way. Built under the ledger's lock.
 */
final class BudgetRefusals {

    /** How many budgets a message names before it says "and n more". */
    private static final int NAMED = 5;

    private BudgetRefusals() {}

    static BudgetExceededException exceeded(BudgetAccount<?> through, BudgetLimits.Refusal refusal, BudgetLedger<?> ledger, MemoryLocation location,
                                            long bytes, int buffers) {
        BudgetAccount<?> by = refusal.budget();
        String asked = bytes + " bytes" + (buffers > 1 ? " for a batch of " + buffers + " buffers (none was allocated)" : "");
        String head = by == null
                ? "memory budget '" + through.path + "' refused " + asked + ": "
                : "memory budget '" + by.path + "' refused " + asked + (by == through ? "" : " asked of '" + through.path + "', a budget under it")
                        + ": they ";
        String refusedBy = by != null ? by.path : root(through).path;
        return new BudgetExceededException(location, bytes, through.path, refusedBy, "out of " + location + " memory: " + head
                + why(refusal, ledger, location.ordinal(), bytes));
    }

    /**
     * What stands in the way of {@code bytes} more at location {@code l}: the limit met and what counts against it
     * ("would pass the limit of ..." for a budget's, to follow a subject; a sentence of its own at the cap).
     */
    static String why(BudgetLimits.Refusal refusal, BudgetLedger<?> ledger, int l, long bytes) {
        BudgetAccount<?> by = refusal.budget();
        if (by == null) {
            return atTheCap(ledger, l);
        }
        MemoryLocation location = MemoryLocation.values()[l];
        BudgetStripes.Figures figures = ledger.figures(by);
        long limit = refusal.atLocation() ? by.locationLimit[l] : by.limit;
        long counted = refusal.atLocation() ? by.content[l] : by.contentInAll();
        long held = refusal.atLocation() ? figures.used()[l] : figures.usedInAll();
        long pending = refusal.atLocation() ? by.pending[l] : by.pendingInAll();
        String text = "would pass the limit of memory budget '" + by.path + "'"
                + (refusal.atLocation() ? " at " + location : "") + " of " + limit + " bytes, against which it counts " + counted + " bytes: "
                + held + " held in " + figures.buffers() + " buffer(s)" + (pending > 0 ? ", " + pending + " being allocated" : "");
        long unused = counted - held - pending;
        if (unused > 0) {
            text += ", " + unused + " reserved by budgets under it and not in use (" + reservations(by.children, ledger, refusal.atLocation() ? l : -1) + ")";
        }
        return text;
    }

    private static String atTheCap(BudgetLedger<?> ledger, int l) {
        MemoryLocation location = MemoryLocation.values()[l];
        List<String> reserving = new ArrayList<>();
        long unused = 0;
        for (BudgetAccount<?> root : ledger.tree().rootAccounts()) {
            if (root.reserved[l] > 0) {
                unused += Math.max(0, root.reserved[l] - root.content[l]);
                if (reserving.size() < NAMED) {
                    reserving.add(root.path + " reserves " + root.reserved[l] + ", holds " + ledger.figures(root).used()[l]);
                }
            }
        }
        String text = "the budgets together would take more than the " + ledger.limits().cap(l) + " bytes of " + location + " memory ("
                + ledger.limits().capProperty(l) + "): they count " + ledger.limits().occupied(l) + " bytes against it";
        if (!reserving.isEmpty()) {
            text += ", " + unused + " of them reserved for budgets and not in use (" + String.join("; ", reserving)
                    + "); memory reserved for a budget is kept for it alone";
        }
        return text;
    }

    /** The budgets among {@code children} (and under them) that reserve at {@code l}, or at any location where {@code l} is -1. */
    private static String reservations(List<? extends BudgetAccount<?>> children, BudgetLedger<?> ledger, int l) {
        List<String> named = new ArrayList<>();
        int more = 0;
        for (BudgetAccount<?> child : children) {
            long reserved = l >= 0 ? child.reserved[l] : child.reservedInAll();
            if (reserved > 0) {
                if (named.size() < NAMED) {
                    BudgetStripes.Figures figures = ledger.figures(child);
                    named.add(child.path + " reserves " + reserved + ", holds " + (l >= 0 ? figures.used()[l] : figures.usedInAll()));
                } else {
                    more++;
                }
            }
        }
        return named.isEmpty() ? "deeper down" : String.join("; ", named) + (more > 0 ? "; and " + more + " more" : "");
    }

    private static BudgetAccount<?> root(BudgetAccount<?> account) {
        BudgetAccount<?> root = account;
        while (root.parent != null) {
            root = root.parent;
        }
        return root;
    }
}
