package dev.compute.boot.scope;

import jakarta.servlet.AsyncContext;
import jakarta.servlet.AsyncListener;
import jakarta.servlet.ServletContext;
import jakarta.servlet.ServletException;
import jakarta.servlet.ServletRequest;
import jakarta.servlet.ServletResponse;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletRequestWrapper;
import java.util.function.UnaryOperator;
import org.jspecify.annotations.Nullable;

/**
 * A request whose asynchronous context wraps each task the application hands to {@link AsyncContext#start}, which the
 * container runs on one of its workers outside every filter: in a view scope ({@link RequestScopeFilter}), in the
 * request's budget ({@link RequestBudgetFilter}). No context is none ({@code null}, as MockMvc's request gives before
 * {@code startAsync}), and one context is handed out as one object.
 */
final class AsyncTasksWrapped extends HttpServletRequestWrapper {

    private final UnaryOperator<Runnable> wrap;
    private @Nullable TasksWrapped started;

    /** {@code wrap} makes of each task the task the container runs. */
    AsyncTasksWrapped(HttpServletRequest request, UnaryOperator<Runnable> wrap) {
        super(request);
        this.wrap = wrap;
    }

    @Override
    public AsyncContext startAsync() {
        return wrapped(super.startAsync());
    }

    @Override
    public AsyncContext startAsync(ServletRequest request, ServletResponse response) {
        return wrapped(super.startAsync(request, response));
    }

    @Override
    public @Nullable AsyncContext getAsyncContext() {
        AsyncContext context = super.getAsyncContext();
        return context == null ? null : wrapped(context);
    }

    private TasksWrapped wrapped(AsyncContext context) {
        TasksWrapped wrapped = started;
        if (wrapped == null || wrapped.context() != context) {
            wrapped = new TasksWrapped(context, wrap);
            started = wrapped;
        }
        return wrapped;
    }

    /** An asynchronous context whose {@link #start} runs the task wrapped; the rest is the container's. */
    private record TasksWrapped(AsyncContext context, UnaryOperator<Runnable> wrap) implements AsyncContext {

        @Override
        public void start(Runnable task) {
            context.start(wrap.apply(task));
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
