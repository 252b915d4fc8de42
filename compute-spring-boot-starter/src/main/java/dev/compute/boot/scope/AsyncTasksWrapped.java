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
            context.addListener(new ListenerWrapped(listener, wrap));
        }

        @Override
        public void addListener(AsyncListener listener, ServletRequest request, ServletResponse response) {
            context.addListener(new ListenerWrapped(listener, wrap), request, response);
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

    /** A listener whose callbacks run wrapped, their own exceptions passed on as they are. */
    private record ListenerWrapped(AsyncListener listener, UnaryOperator<Runnable> wrap) implements AsyncListener {

        @Override
        public void onComplete(AsyncEvent event) throws IOException {
            run(() -> listener.onComplete(event));
        }

        @Override
        public void onTimeout(AsyncEvent event) throws IOException {
            run(() -> listener.onTimeout(event));
        }

        @Override
        public void onError(AsyncEvent event) throws IOException {
            run(() -> listener.onError(event));
        }

        @Override
        public void onStartAsync(AsyncEvent event) throws IOException {
            run(() -> listener.onStartAsync(event));
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
