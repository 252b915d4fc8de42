package dev.compute.boot.scope;

import jakarta.servlet.AsyncContext;
import jakarta.servlet.AsyncEvent;
import jakarta.servlet.AsyncListener;
import jakarta.servlet.ServletContext;
import jakarta.servlet.ServletException;
import jakarta.servlet.ServletRequest;
import jakarta.servlet.ServletResponse;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletRequestWrapper;
import java.io.IOException;
import java.util.function.UnaryOperator;
import org.jspecify.annotations.Nullable;

/**
 * A request whose asynchronous context wraps each task the application hands to {@link AsyncContext#start}, and each
 * callback of the listeners added to it (Spring MVC's, which runs a {@code DeferredResult}'s or {@code WebAsyncTask}'s
 * timeout and error callbacks), which the container runs on one of its threads outside every filter: in a view scope
 * ({@link RequestScopeFilter}), in the request's budget ({@link RequestBudgetFilter}). No context is none ({@code null},
 * as MockMvc's request gives before {@code startAsync}), and one context is handed out as one object.
 */
final class AsyncTasksWrapped extends HttpServletRequestWrapper {

    private final UnaryOperator<Runnable> wrap;
    /** Read by the listeners' callbacks too, on the container's threads. */
    private volatile @Nullable TasksWrapped started;

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
        if (wrapped == null || wrapped.context != context) {
            wrapped = new TasksWrapped(context);
            started = wrapped;
        }
        return wrapped;
    }

    /** An asynchronous context whose {@link #start} runs the task wrapped; the rest is the container's. */
    private final class TasksWrapped implements AsyncContext {

        private final AsyncContext context;

        TasksWrapped(AsyncContext context) {
            this.context = context;
        }

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
            context.addListener(new ListenerWrapped(listener));
        }

        @Override
        public void addListener(AsyncListener listener, ServletRequest request, ServletResponse response) {
            context.addListener(new ListenerWrapped(listener), request, response);
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

    /**
     * A listener whose callbacks run wrapped, their own exceptions passed on as they are, and are given this request's
     * asynchronous context: a listener that adds itself again as the request starts its next asynchronous cycle (as
     * the Servlet spec has it do to hear that cycle) goes through it, and so stays wrapped, as does a task it starts.
     */
    private final class ListenerWrapped implements AsyncListener {

        private final AsyncListener listener;

        ListenerWrapped(AsyncListener listener) {
            this.listener = listener;
        }

        @Override
        public void onComplete(AsyncEvent event) throws IOException {
            run(() -> listener.onComplete(ours(event)));
        }

        @Override
        public void onTimeout(AsyncEvent event) throws IOException {
            run(() -> listener.onTimeout(ours(event)));
        }

        @Override
        public void onError(AsyncEvent event) throws IOException {
            run(() -> listener.onError(ours(event)));
        }

        @Override
        public void onStartAsync(AsyncEvent event) throws IOException {
            run(() -> listener.onStartAsync(ours(event)));
        }

        private AsyncEvent ours(AsyncEvent event) {
            AsyncContext context = event.getAsyncContext();
            return context == null ? event
                    : new AsyncEvent(wrapped(context), event.getSuppliedRequest(), event.getSuppliedResponse(), event.getThrowable());
        }

        private void run(Callback callback) throws IOException {
            IOException[] failed = new IOException[1];
            wrap.apply(() -> {
                try {
                    callback.run();
                } catch (IOException e) {
                    failed[0] = e;
                }
            }).run();
            if (failed[0] != null) {
                throw failed[0];
            }
        }

        private interface Callback {
            void run() throws IOException;
        }
    }
}
