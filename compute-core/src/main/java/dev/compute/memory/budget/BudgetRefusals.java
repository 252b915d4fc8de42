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
                + held + " held" + (refusal.atLocation() ? "" : " in " + figures.buffers() + " buffer(s)") // buffers are counted at all locations only
                + (pending > 0 ? ", " + pending + " being allocated" : "");
        long unused = counted - held - pending;
        if (unused > 0) {
            text += ", " + unused + " reserved by budgets under it and not in use (" + reservations(by.children, ledger, refusal.atLocation() ? l : -1) + ")";
        }
        return text;
    }

    private static String atTheCap(BudgetLedger<?> ledger, int l) {
        MemoryLocation location = MemoryLocation.values()[l];
        long unused = 0;
        for (BudgetAccount<?> root : ledger.tree().rootAccounts()) {
            // what a root occupies beyond what its tree holds and has under way: reservations in it or under it not in use
            unused += Math.max(0, root.occupied(l) - ledger.figures(root).used()[l] - root.pending[l]);
        }
        String text = "the budgets together would take more than the " + ledger.limits().cap(l) + " bytes of " + location + " memory ("
                + ledger.limits().capProperty(l) + "): they count " + ledger.limits().occupied(l) + " bytes against it";
        if (unused > 0) {
            text += ", " + unused + " of them reserved for budgets and not in use (" + reservations(ledger.tree().rootAccounts(), ledger, l)
                    + "); memory reserved for a budget is kept for it alone";
        }
        return text;
    }

    /** The budgets among {@code accounts} and under them that reserve at {@code l}, or at any location where {@code l} is -1. */
    private static String reservations(List<? extends BudgetAccount<?>> accounts, BudgetLedger<?> ledger, int l) {
        List<String> named = new ArrayList<>();
        int more = reserving(accounts, ledger, l, named);
        return named.isEmpty() ? "deeper down" : String.join("; ", named) + (more > 0 ? "; and " + more + " more" : "");
    }

    /** Names in {@code named}, the parents first, up to {@link #NAMED} of the budgets that reserve; returns how many more do. */
    private static int reserving(List<? extends BudgetAccount<?>> accounts, BudgetLedger<?> ledger, int l, List<String> named) {
        int more = 0;
        for (BudgetAccount<?> account : accounts) {
            long reserved = l >= 0 ? account.reserved[l] : account.reservedInAll();
            if (reserved > 0) {
                if (named.size() < NAMED) {
                    BudgetStripes.Figures figures = ledger.figures(account);
                    named.add(account.path + " reserves " + reserved + ", holds " + (l >= 0 ? figures.used()[l] : figures.usedInAll()));
                } else {
                    more++;
                }
            }
            more += reserving(account.children, ledger, l, named);
        }
        return more;
    }

    private static BudgetAccount<?> root(BudgetAccount<?> account) {
        BudgetAccount<?> root = account;
        while (root.parent != null) {
            root = root.parent;
        }
        return root;
    }
}
