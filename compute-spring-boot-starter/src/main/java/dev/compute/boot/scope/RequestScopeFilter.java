package dev.compute.boot.scope;

import dev.compute.memory.ViewScope;
import jakarta.servlet.AsyncContext;
import jakarta.servlet.Filter;
import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.ServletRequest;
import jakarta.servlet.ServletResponse;
import jakarta.servlet.http.HttpServletRequest;
import java.io.IOException;

/**
 * Runs each dispatch of a request in a {@link ViewScope}: the views its thread takes end when the dispatch returns.
 * An asynchronous request's later dispatches (registered for {@code ASYNC}) get scopes of their own on their threads;
 * a forward, include or error dispatch on the same thread nests inside the request's. So does a task the application
 * hands to {@link AsyncContext#start}, which the container runs on one of its workers outside every filter: the
 * request's {@code startAsync} hands out a context whose {@code start} wraps the task in a scope of its own.
 */
public final class RequestScopeFilter implements Filter {

    @Override
    public void doFilter(ServletRequest request, ServletResponse response, FilterChain chain) throws IOException, ServletException {
        try (ViewScope scope = ViewScope.open()) {
            chain.doFilter(request instanceof HttpServletRequest http ? new AsyncTasksWrapped(http, ViewScope::wrap) : request, response);
        }
    }
}
