package dev.compute.boot.scope;

import dev.compute.memory.MemoryBudget;
import jakarta.servlet.AsyncEvent;
import jakarta.servlet.AsyncListener;
import jakarta.servlet.DispatcherType;
import jakarta.servlet.Filter;
import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.ServletRequest;
import jakarta.servlet.ServletResponse;
import jakarta.servlet.http.HttpServletRequest;
import java.io.IOException;
import org.springframework.util.ClassUtils;

/**
 * Runs each web request whose budget the {@link RequestBudgetResolver} names in a budget of its own under it
 * ({@code tenant-a/request-17}, limited by the tenant's {@code request-limit}), current on the request's threads
 * ({@link BudgetScope}; Spring MVC's {@code Callable}s for the request and the tasks it starts on its asynchronous
 * context too), and closes it as the request ends: when its first dispatch returns, or, for an asynchronous
 * request, when it completes (after a timeout or an error, once the dispatch answering them has run in it). What the request forgot to close is closed then and logged with the
 * request's method and path. A request the resolver names no budget for runs as it would without this filter.
 */
public final class RequestBudgetFilter implements Filter {

    /** The request attribute holding the request's budget, for its later dispatches. */
    public static final String BUDGET_ATTRIBUTE = RequestBudgetFilter.class.getName() + ".budget";

    // Spring MVC's asynchronous manager, whose Callables run in the request's budget too; a servlet application may lack it
    private static final boolean SPRING_WEB = ClassUtils.isPresent("org.springframework.web.context.request.async.WebAsyncManager",
            RequestBudgetFilter.class.getClassLoader());

    private final RequestBudgetResolver resolver;
    private final ScopedBudgets budgets;

    RequestBudgetFilter(RequestBudgetResolver resolver, ScopedBudgets budgets) {
        this.resolver = resolver;
        this.budgets = budgets;
    }

    @Override
    public void doFilter(ServletRequest request, ServletResponse response, FilterChain chain) throws IOException, ServletException {
        if (!(request instanceof HttpServletRequest http)) {
            chain.doFilter(request, response);
            return;
        }
        if (request.getDispatcherType() == DispatcherType.ASYNC) {
            // open until the request completes, unless its tenant closed: then what a later dispatch allocates is refused,
            // not let past the tenant's limit
            if (request.getAttribute(BUDGET_ATTRIBUTE) instanceof MemoryBudget budget) {
                try (BudgetScope scope = BudgetScope.open(budget)) {
                    chain.doFilter(startingTasksIn(budget, http), response);
                }
            } else {
                chain.doFilter(request, response);
            }
            return;
        }
        MemoryBudget tenant = resolver.budgetFor(http);
        if (tenant == null) {
            chain.doFilter(request, response);
            return;
        }
        MemoryBudget budget = budgets.open(tenant, "request");
        request.setAttribute(BUDGET_ATTRIBUTE, budget);
        if (SPRING_WEB) {
            CallablesInRequestBudget.register(request, budget);
        }
        try (BudgetScope scope = BudgetScope.open(budget)) {
            chain.doFilter(startingTasksIn(budget, http), response);
        } finally {
            String work = "request " + http.getMethod() + " " + http.getRequestURI();
            if (request.isAsyncStarted()) {
                request.getAsyncContext().addListener(new ClosingAtTheEnd(budget, tenant, work));
            } else {
                ScopedBudgets.end(budget, tenant, () -> work);
            }
        }
    }

    /** The request, whose asynchronous context starts each task ({@code AsyncContext.start}) in its budget. */
    private static HttpServletRequest startingTasksIn(MemoryBudget budget, HttpServletRequest request) {
        return new AsyncTasksWrapped(request, task -> () -> {
            try (BudgetScope scope = BudgetScope.open(budget)) {
                task.run();
            }
        });
    }

    /**
     * Closes an asynchronous request's budget as the request completes, which it does however it ends. Not at a timeout
     * or an error: the dispatch that answers them (Spring MVC's, to a fallback) is still the request's, in its budget.
     */
    private record ClosingAtTheEnd(MemoryBudget budget, MemoryBudget tenant, String work) implements AsyncListener {
        @Override
        public void onComplete(AsyncEvent event) {
            ScopedBudgets.end(budget, tenant, () -> work);
        }

        @Override
        public void onTimeout(AsyncEvent event) {}

        @Override
        public void onError(AsyncEvent event) {}

        @Override
        public void onStartAsync(AsyncEvent event) {
            event.getAsyncContext().addListener(this); // a new cycle of the same request: still closes at its end
        }
    }
}
