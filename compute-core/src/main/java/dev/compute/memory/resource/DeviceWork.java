package dev.compute.memory.resource;

import dev.compute.memory.spi.CompletionThreads;
import java.util.Collection;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Supplier;

/**
 * The one bounded wait for device work that freed memory still depends on, used by every close and by the pool; and
 * the attempts that must not wait at all.
 */
public final class DeviceWork {

    /** Bound while an allocation must not wait: an asynchronous request's first try, on its caller's thread. */
    private static final ScopedValue<Boolean> NOT_WAITING = ScopedValue.newInstance();

    private DeviceWork() {}

    /**
     * Runs {@code attempt} as an allocation that takes what is there and waits for nothing: not for device work on freed
     * blocks, nor a trim under way, nor a compaction or an out-of-memory handler; a failure says only that nothing was
     * there, and whoever retries may wait.
     */
    public static <T> T withoutWaiting(Supplier<T> attempt) {
        return ScopedValue.where(NOT_WAITING, Boolean.TRUE).call(attempt::get);
    }

    /** False within {@link #withoutWaiting}: an allocation's recovery that would wait is left to its retry. */
    public static boolean mayWait() {
        return !NOT_WAITING.isBound();
    }

    /**
     * Waits for every future until {@code deadline} (a {@link System#nanoTime()} value); failed or cancelled work
     * counts as over. False when one is not done by then, or the thread is interrupted (its flag set again).
     */
    public static boolean awaitAll(Collection<? extends CompletableFuture<?>> work, long deadline) {
        CompletionThreads.beforeWaiting(); // the work may be completed later by the very task that runs this wait
        for (CompletableFuture<?> future : work) {
            try {
                future.get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
            } catch (ExecutionException | CancellationException e) {
                // the work is over either way: the memory is free to reuse
            } catch (TimeoutException e) {
                return false;
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return false;
            }
        }
        return true;
    }
}
