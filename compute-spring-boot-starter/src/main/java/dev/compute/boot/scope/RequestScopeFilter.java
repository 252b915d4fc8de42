package dev.compute.boot.scope;

import dev.compute.memory.ViewScope;
import jakarta.servlet.AsyncContext;
import jakarta.servlet.AsyncListener;
import jakarta.servlet.Filter;
import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletContext;
import jakarta.servlet.ServletException;
import jakarta.servlet.ServletRequest;
import jakarta.servlet.ServletResponse;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletRequestWrapper;
import java.io.IOException;
import org.jspecify.annotations.Nullable;

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
            chain.doFilter(request instanceof HttpServletRequest http ? new AsyncStartsInScopes(http) : request, response);
        }
    }

    /**
     * The request, whose asynchronous context starts each task in a view scope. No context is none ({@code null}, as
     * MockMvc's request gives before {@code startAsync}), and one context is handed out as one object.
     */
    private static final class AsyncStartsInScopes extends HttpServletRequestWrapper {

        private @Nullable TasksInScopes started;

        AsyncStartsInScopes(HttpServletRequest request) {
            super(request);
        }

        @Override
        public AsyncContext startAsync() {
            return inScopes(super.startAsync());
        }

        @Override
        public AsyncContext startAsync(ServletRequest request, ServletResponse response) {
            return inScopes(super.startAsync(request, response));
        }

        @Override
        public @Nullable AsyncContext getAsyncContext() {
            AsyncContext context = super.getAsyncContext();
            return context == null ? null : inScopes(context);
        }

        private TasksInScopes inScopes(AsyncContext context) {
            TasksInScopes wrapped = started;
            if (wrapped == null || wrapped.context() != context) {
                wrapped = new TasksInScopes(context);
                started = wrapped;
            }
            return wrapped;
        }
    }

    /** An asynchronous context whose {@link #start} runs the task in a view scope; the rest is the container's. */
    private record TasksInScopes(AsyncContext context) implements AsyncContext {

        @Override
        public void start(Runnable task) {
            context.start(ViewScope.wrap(task));
        }

        @Override
        public ServletRequest getRequest() {
            return context.getRequest();
        }

        @Override
        public ServletResponse getResponse() {
            return context.getResponse();
        }

        @Override
        public boolean hasOriginalRequestAndResponse() {
            return context.hasOriginalRequestAndResponse();
        }

        @Override
        public void dispatch() {
            context.dispatch();
        }

        @Override
        public void dispatch(String path) {
            context.dispatch(path);
        }

        @Override
        public void dispatch(ServletContext servletContext, String path) {
            context.dispatch(servletContext, path);
        }

        @Override
        public void complete() {
            context.complete();
        }

        @Override
        public void addListener(AsyncListener listener) {
            context.addListener(listener);
        }

        @Override
        public void addListener(AsyncListener listener, ServletRequest request, ServletResponse response) {
            context.addListener(listener, request, response);
        }

        @Override
        public <T extends AsyncListener> T createListener(Class<T> type) throws ServletException {
            return context.createListener(type);
        }

        @Override
        public void setTimeout(long timeout) {
            context.setTimeout(timeout);
        }

        @Override
        public long getTimeout() {
            return context.getTimeout();
        }
    }
}
