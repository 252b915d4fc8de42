package dev.compute.boot.scope;

import dev.compute.memory.MemoryBudget;
import jakarta.servlet.ServletRequest;
import java.util.concurrent.Callable;
import org.jspecify.annotations.Nullable;
import org.springframework.web.context.request.NativeWebRequest;
import org.springframework.web.context.request.async.CallableProcessingInterceptor;
import org.springframework.web.context.request.async.WebAsyncUtils;

/**
 * Makes a request's budget current on the thread where Spring MVC runs what the request handed it (a {@code Callable},
 * a {@code WebAsyncTask}, a {@code StreamingResponseBody}) on its task executor, as it is on the request's own threads.
 * Where a budget is current there already (the task's own, {@code compute.scopes.task-budgets}), that one stays. One per
 * request, holding its budget, so the executor's thread never reads the request, which may have ended (timed out) and
 * been recycled for another by then.
 */
final class CallablesInRequestBudget implements CallableProcessingInterceptor {

    private final MemoryBudget budget;
    private @Nullable BudgetScope scope;

    private CallablesInRequestBudget(MemoryBudget budget) {
        this.budget = budget;
    }

    /** Registers one with the request's asynchronous manager, which runs Spring MVC's {@code Callable}s. */
    static void register(ServletRequest request, MemoryBudget budget) {
        WebAsyncUtils.getAsyncManager(request).registerCallableInterceptor(CallablesInRequestBudget.class.getName(), new CallablesInRequestBudget(budget));
    }

    @Override
    public <T> void preProcess(NativeWebRequest request, Callable<T> task) {
        if (BudgetScope.current().isEmpty()) {
            scope = BudgetScope.open(budget);
        }
    }

    @Override
    public <T> void postProcess(NativeWebRequest request, Callable<T> task, @Nullable Object concurrentResult) {
        // on the thread preProcess ran on, after the task, whatever it threw
        BudgetScope opened = scope;
        scope = null;
        if (opened != null) {
            opened.close();
        }
    }
}
