package dev.compute.boot.scope;

import dev.compute.memory.MemoryBudget;
import jakarta.servlet.http.HttpServletRequest;
import org.jspecify.annotations.Nullable;

/**
 * Which budget a web request's own budget goes under (a tenant's), where {@code compute.scopes.request-budgets} is on.
 * The starter's resolves the configured budget the {@code compute.scopes.budget-header} names; a bean of your own
 * replaces it (a tenant taken from the authenticated principal, say).
 */
@FunctionalInterface
public interface RequestBudgetResolver {

    /** The budget to make the request's own under; null: the request runs without a budget. */
    @Nullable MemoryBudget budgetFor(HttpServletRequest request);
}
