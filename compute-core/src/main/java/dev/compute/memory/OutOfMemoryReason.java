package dev.compute.memory;

/** Why an allocation finally failed, for figures and alerts; the exception's message says the rest. */
public enum OutOfMemoryReason {
    /** The location's cap ({@code max-pool-size}, {@code max-pinned-size}) would have been passed, or the request is larger. */
    POOL_LIMIT,
    /** A limit composed into the chain by the application (a {@link dev.compute.memory.resource.LimitingResource}). */
    ADAPTOR_LIMIT,
    /** A {@link MemoryBudget}'s limit, or memory that other budgets reserved ({@link BudgetExceededException}). */
    BUDGET_LIMIT,
    /** The backend had no memory left, after the pool gave back what it caches. */
    DEVICE_MEMORY,
    /** Memory was held by freed blocks whose device work did not finish within the device wait timeout. */
    DEVICE_WORK_STUCK
}
