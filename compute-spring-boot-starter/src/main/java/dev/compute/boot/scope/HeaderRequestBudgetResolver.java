package dev.compute.boot.scope;

import dev.compute.boot.ComputeBudgets;
import dev.compute.memory.MemoryBudget;
import jakarta.servlet.http.HttpServletRequest;
import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.jspecify.annotations.Nullable;

/**
 * The starter's {@link RequestBudgetResolver}: the configured budget a header names, {@code tenant-a} (of the primary
 * manager) or {@code gpu/tenant-a}; no header, or a name that is no configured budget's, and the request runs
 * without one. The header is the caller's word: use it where a gateway the service trusts sets it.
 */
public final class HeaderRequestBudgetResolver implements RequestBudgetResolver {

    private static final Log log = LogFactory.getLog(HeaderRequestBudgetResolver.class);

    private final ComputeBudgets budgets;
    private final String header;

    public HeaderRequestBudgetResolver(ComputeBudgets budgets, String header) {
        this.budgets = budgets;
        this.header = header;
    }

    @Override
    public @Nullable MemoryBudget budgetFor(HttpServletRequest request) {
        String named = request.getHeader(header);
        if (named == null || named.isBlank()) {
            return null;
        }
        String name = named.strip();
        int slash = name.indexOf('/');
        MemoryBudget budget = (slash < 0 ? budgets.budget(name) : budgets.budget(name.substring(0, slash), name.substring(slash + 1))).orElse(null);
        if (budget == null && log.isDebugEnabled()) {
            log.debug("the " + header + " header names no configured budget: '" + name + "'; the request runs without one");
        }
        return budget;
    }
}
