package dev.compute.memory.spi;

import java.util.ArrayDeque;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.jspecify.annotations.Nullable;

/**
 * The threads on which a backend completes its futures, and so runs the application's dependent actions: tasks
 * counted while they run, so that a close made from one of them (an action that closes the manager) waits for the
 * others to end, not for itself, which ends only once that close has returned.
 *
 * <p>A task of ordered steps ({@link #executeInOrder}: the futures of work the device finished together, completed in
 * the order the work was queued) runs an action of one step before the later steps. An action that waits, through the
 * library, for work of a later step (a close, or an allocation that needs memory that work frees) would wait its whole
 * bound for nothing (and a {@code join} of a later step's future for ever), so the library's waits, and those on the
 * futures it hands out ({@link CallerFutures}), call {@link #beforeWaiting} first, which hands the later steps, in
 * order, on to another task.
 */
public final class CompletionThreads {

    private static final System.Logger LOG = System.getLogger(CompletionThreads.class.getName());

    /** The instance whose task the current thread runs, if any. */
    private static final ThreadLocal<@Nullable CompletionThreads> RUNNING_FOR = new ThreadLocal<>();
    /** The steps not run yet of the ordered task the current thread runs, if any: only that thread takes from it. */
    private static final ThreadLocal<@Nullable ArrayDeque<Runnable>> STEPS_LEFT = new ThreadLocal<>();

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
     * Runs {@code steps} one after the other as one task ({@link #execute}); a step that throws, an {@link Error} too,
     * is logged and the next ones still run. The steps not run yet when one of them waits through the library go on
     * in another task ({@link #beforeWaiting}).
     */
    public void executeInOrder(List<? extends Runnable> steps) {
        ArrayDeque<Runnable> left = new ArrayDeque<>(steps);
        execute(() -> runInOrder(left));
    }

    private static void runInOrder(ArrayDeque<Runnable> left) {
        ArrayDeque<Runnable> outer = STEPS_LEFT.get(); // set where a refused hand-on runs the steps within a step
        STEPS_LEFT.set(left);
        try {
            for (Runnable step; (step = left.poll()) != null; ) {
                try {
                    step.run();
                } catch (Throwable e) { // the later steps complete futures others wait for
                    LOG.log(System.Logger.Level.WARNING, "completing a device future failed; the later ones still complete", e);
                }
            }
        } finally {
            STEPS_LEFT.set(outer);
        }
    }

    /**
     * Called by the library before a wait for device work: on a thread running ordered steps ({@link #executeInOrder}),
     * within one of them (an application's dependent action), hands the steps not run yet, in order, on to another task
     * of the same threads, since the wait may be for one of them; they run here, at once, where the threads take no
     * more tasks (closed) or none can be started. Nothing to do on any other thread.
     */
    public static void beforeWaiting() {
        ArrayDeque<Runnable> left = STEPS_LEFT.get();
        if (left == null || left.isEmpty()) {
            return;
        }
        ArrayDeque<Runnable> handedOn = new ArrayDeque<>(left);
        left.clear();
        try {
            Objects.requireNonNull(RUNNING_FOR.get()).execute(() -> runInOrder(handedOn));
        } catch (RejectedExecutionException | OutOfMemoryError noThread) { // closed, or no thread can be started
            runInOrder(handedOn); // here rather than never: their futures' waiters would wait their whole bounds
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
