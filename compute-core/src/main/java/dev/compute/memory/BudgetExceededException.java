package dev.compute.memory;

/**
 * A {@link MemoryBudget} refused an allocation ({@link OutOfMemoryReason#BUDGET_LIMIT}): with it, the budget, or a
 * budget above it, would pass a limit, or the budgets together would take memory another budget reserved. Nothing was
 * taken from the pool. The message says which budget refused, what it holds and what stands in the way, as the
 * manager's own out-of-memory message says what the pool holds.
 */
public class BudgetExceededException extends DeviceOutOfMemoryException {

    private final String budget;
    private final String refusedBy;

    public BudgetExceededException(MemoryLocation location, long requestedBytes, String budget, String refusedBy, String message) {
        super(location, requestedBytes, OutOfMemoryReason.BUDGET_LIMIT, message);
        this.budget = budget;
        this.refusedBy = refusedBy;
    }

    /** The path of the budget allocated through. */
    public String budget() {
        return budget;
    }

    /**
     * The path of the budget whose limit refused: the budget allocated through, one of its ancestors, or, where the
     * budgets together would take reserved memory, the root the request came through.
     */
    public String refusedBy() {
        return refusedBy;
    }
}
