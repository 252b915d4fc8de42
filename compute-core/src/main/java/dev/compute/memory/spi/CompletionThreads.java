package dev.compute.memory.spi;

import java.util.concurrent.ExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.jspecify.annotations.Nullable;

/**
 * The threads on which a backend completes its futures, and so runs the application's dependent actions: tasks
 * counted while they run, so that a close made from one of them (an action that closes the manager) waits for the
 * others to end, not for itself, which ends only once that close has returned.
 */
public final class CompletionThreads {

    /** The instance whose task the current thread runs, if any. */
    private static final ThreadLocal<@Nullable CompletionThreads> RUNNING_FOR = new ThreadLocal<>();

    private final ExecutorService executor;
    /** Tasks handed in and not yet ended. */
    private final AtomicInteger running = new AtomicInteger();

    public CompletionThreads(ExecutorService executor) {
        this.executor = executor;
    }

    /** Runs {@code task} on one of the threads, counted until it ends; throws as the executor refuses it. */
    public void execute(Runnable task) {
        running.incrementAndGet();
        try {
            executor.execute(() -> {
                RUNNING_FOR.set(this);
                try {
                    task.run();
                } finally {
                    RUNNING_FOR.remove();
                    running.decrementAndGet();
                }
            });
        } catch (RuntimeException | Error e) {
            running.decrementAndGet();
            throw e;
        }
    }

    /**
     * Takes no more tasks and waits, until {@code deadline} ({@link System#nanoTime}), for those under way to end: all
     * of them, or, called from one of them, every other. True when they ended in time.
     */
    public boolean shutdownAndAwait(long deadline) {
        executor.shutdown();
        if (RUNNING_FOR.get() == this) {
            return DeviceWaits.until(() -> running.get() == 1, deadline);
        }
        boolean interrupted = false;
        try {
            long left;
            while (!executor.isTerminated() && (left = deadline - System.nanoTime()) > 0) {
                try {
                    executor.awaitTermination(left, TimeUnit.NANOSECONDS);
                } catch (InterruptedException e) {
                    interrupted = true;
                }
            }
            return executor.isTerminated();
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
