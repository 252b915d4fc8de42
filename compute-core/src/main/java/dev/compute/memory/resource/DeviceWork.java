package dev.compute.memory.resource;

import java.util.Collection;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/** The one bounded wait for device work that freed memory still depends on, used by every close and by the pool. */
public final class DeviceWork {

    private DeviceWork() {}

    /**
     * Waits for every future until {@code deadline} (a {@link System#nanoTime()} value); failed or cancelled work
     * counts as over. False when one is not done by then, or the thread is interrupted (its flag set again).
     */
    public static boolean awaitAll(Collection<? extends CompletableFuture<?>> work, long deadline) {
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
