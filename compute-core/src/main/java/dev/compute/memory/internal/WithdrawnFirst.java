package dev.compute.memory.internal;

import java.util.concurrent.CompletableFuture;

/**
 * The future of a request waiting in a queue, which its holder may end itself (cancel it, or complete it as
 * {@code orTimeout} does): {@link #withdraw} runs first, while it is not done yet, so that the request is off its queue
 * (and out of the figures) before the functions added to the future run. The queue's own endings (served, timed out,
 * failed at a close) settle the request before they complete it, so that {@code withdraw} then finds nothing to do.
 */
public abstract class WithdrawnFirst<T> extends CompletableFuture<T> {

    /** Takes the request off its queue, if nothing settled it yet. */
    protected abstract void withdraw();

    @Override
    public boolean cancel(boolean mayInterruptIfRunning) {
        withdrawUnlessDone();
        return super.cancel(mayInterruptIfRunning);
    }

    @Override
    public boolean complete(T value) {
        withdrawUnlessDone();
        return super.complete(value);
    }

    @Override
    public boolean completeExceptionally(Throwable failure) {
        withdrawUnlessDone();
        return super.completeExceptionally(failure);
    }

    /** Completes it as the queue's own ending does, once it settled the request: with nothing to withdraw. */
    protected final boolean completeWithoutWithdrawing(T value) {
        return super.complete(value);
    }

    private void withdrawUnlessDone() {
        if (!isDone()) {
            withdraw();
        }
    }
}
