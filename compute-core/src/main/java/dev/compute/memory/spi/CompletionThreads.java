package dev.compute.memory.spi;

import dev.compute.memory.internal.LibraryThreads;
import java.util.ArrayDeque;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
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
 * order, on to another task. An action that blocks without the library (on a latch of its own) is seen by a watch
 * thread instead: a step still running {@link #STALL_NANOS} or more after the watch first saw it has the later steps
 * handed on the same way. Their futures still complete in the order of their work, each after the blocked one's.
 */
public final class CompletionThreads {

    private static final System.Logger LOG = System.getLogger(CompletionThreads.class.getName());

    /**
     * How long the watch must have seen one step of an ordered task running before it hands the later steps on: timed
     * from the look that first saw it, so the step may run up to about twice this.
     */
    static final long STALL_NANOS = TimeUnit.MILLISECONDS.toNanos(50);
    /**
     * How long the watch waits with nothing to look at before it ends (the next ordered task starts another): threads
     * never shut down (CUDA's, kept where its close found the device busy) must not keep it parked for good.
     */
    private static final long WATCH_IDLE_NANOS = TimeUnit.SECONDS.toNanos(1);

    /** The instance whose task the current thread runs, if any. */
    private static final ThreadLocal<@Nullable CompletionThreads> RUNNING_FOR = new ThreadLocal<>();
    /** The ordered task the current thread runs, if any. */
    private static final ThreadLocal<@Nullable OrderedSteps> STEPS = new ThreadLocal<>();

    private final ExecutorService executor;
    /** Tasks handed in and not yet ended. */
    private final AtomicInteger running = new AtomicInteger();
    /** The ordered tasks under way, which the watch looks at. */
    private final Set<OrderedSteps> ordered = ConcurrentHashMap.newKeySet();
    /** Started with an ordered task; ends once the threads are shut down, or idle for {@link #WATCH_IDLE_NANOS}. */
    private volatile @Nullable Thread watch;
    /** Set by the watch before it sleeps with no ordered task to look at, so that the next one wakes it. */
    private volatile boolean watchIdle;
    private volatile boolean shutDown;

    /** An ordered task's steps not started yet, which the thread running it and the watch take from, under this monitor. */
    private static final class OrderedSteps {
        private final ArrayDeque<Runnable> left;
        /** Steps started so far: a count the watch compares between two looks. */
        private volatile int started;
        /** What the watch saw of {@link #started} at its last look; only the watch reads and writes it. */
        private int seenByWatch = -1;

        OrderedSteps(ArrayDeque<Runnable> left) {
            this.left = left;
        }

        synchronized @Nullable Runnable next() {
            Runnable step = left.poll();
            if (step != null) {
                started++;
            }
            return step;
        }

        /**
         * Hands the steps not started yet, in order, to another task of {@code threads}: true once they are handed on
         * (or there were none), false where the threads take no more tasks (closed) or none can be started: kept here.
         */
        synchronized boolean handOn(CompletionThreads threads) {
            if (left.isEmpty()) {
                return true;
            }
            try { // the copy too: an OutOfMemoryError of the heap must not end the watch, which nothing would start again
                OrderedSteps rest = new OrderedSteps(new ArrayDeque<>(left));
                threads.execute(() -> threads.runWatched(rest));
            } catch (RejectedExecutionException | OutOfMemoryError notHandedOn) {
                return false;
            }
            left.clear();
            return true;
        }

        /** Whether the step the watch saw running at its last look still runs, with later steps waiting behind it. */
        boolean stalledSinceLastLook() {
            int now = started;
            boolean same = now == seenByWatch;
            seenByWatch = now;
            return same && hasLeft();
        }

        private synchronized boolean hasLeft() {
            return !left.isEmpty();
        }
    }

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
     * is logged and the next ones still run. The steps not run yet when one of them waits through the library
     * ({@link #beforeWaiting}), or blocks past {@link #STALL_NANOS}, go on in another task.
     */
    public void executeInOrder(List<? extends Runnable> steps) {
        OrderedSteps task = new OrderedSteps(new ArrayDeque<>(steps));
        execute(() -> runWatched(task));
    }

    /** Runs {@code steps} where the watch sees them. */
    private void runWatched(OrderedSteps steps) {
        ordered.add(steps);
        wakeWatch(); // after the add: a watch that went idle before it is woken here, one going idle after it sees it
        try {
            runInOrder(steps);
        } finally {
            ordered.remove(steps);
        }
    }

    private static void runInOrder(OrderedSteps steps) {
        OrderedSteps outer = STEPS.get(); // set where a refused hand-on runs the steps within a step
        boolean outerInterrupted = Thread.interrupted(); // that step's own, put back after
        STEPS.set(steps);
        try {
            for (Runnable step; (step = steps.next()) != null; ) {
                try {
                    step.run();
                } catch (Throwable e) { // the later steps complete futures others wait for
                    LOG.log(System.Logger.Level.WARNING, "completing a device future failed; the later ones still complete", e);
                }
                Thread.interrupted(); // an interrupt a step's action left set is not the next action's
            }
        } finally {
            STEPS.set(outer);
            if (outerInterrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /**
     * Called by the library before a wait for device work: on a thread running ordered steps ({@link #executeInOrder}),
     * within one of them (an application's dependent action), hands the steps not run yet, in order, on to another task
     * of the same threads, since the wait may be for one of them; they run here, at once, where the threads take no
     * more tasks (closed) or none can be started. Nothing to do on any other thread.
     */
    public static void beforeWaiting() {
        OrderedSteps steps = STEPS.get();
        if (steps != null && !steps.handOn(Objects.requireNonNull(RUNNING_FOR.get()))) {
            runInOrder(steps); // here rather than never: their futures' waiters would wait their whole bounds
        }
    }

    private void wakeWatch() {
        Thread watching = watch;
        if (watching == null) {
            startWatch();
        } else if (watchIdle) {
            LockSupport.unpark(watching);
        }
    }

    private synchronized void startWatch() {
        if (watch != null || shutDown) {
            return;
        }
        Thread watching = LibraryThreads.daemon("compute-completions-watch", this::watchSteps);
        watch = watching; // before it starts: a shutdown that does not see it yet is seen by its first look at shutDown
        try {
            watching.start();
        } catch (OutOfMemoryError noThread) { // the steps still run, unwatched; the next ordered task tries again
            watch = null;
        }
    }

    /**
     * Looks at the ordered tasks under way now and then: one whose step has run since the last look, at least
     * {@link #STALL_NANOS} ago, has its later steps handed on. Sleeps while there are none, and ends once none came for
     * {@link #WATCH_IDLE_NANOS}.
     */
    private void watchSteps() {
        while (!shutDown) {
            if (ordered.isEmpty()) {
                watchIdle = true;
                if (ordered.isEmpty() && !shutDown) { // read after watchIdle is set: see runWatched
                    LockSupport.parkNanos(this, WATCH_IDLE_NANOS);
                }
                watchIdle = false;
                if (ordered.isEmpty() && !stayOn()) {
                    return;
                }
                continue;
            }
            LockSupport.parkNanos(this, STALL_NANOS);
            for (OrderedSteps steps : ordered) {
                if (steps.stalledSinceLastLook()) {
                    steps.handOn(this); // kept where it cannot: the stalled step's thread runs them once it returns
                }
            }
        }
    }

    /**
     * The watch, idle, ends: false then. It leaves {@link #watch} first, so that a task added from then on starts another,
     * and stays on (true) where one was added meanwhile, which saw it still there and started none.
     */
    private boolean stayOn() {
        watch = null;
        return !ordered.isEmpty() && retakeWatch();
    }

    private synchronized boolean retakeWatch() {
        if (watch != null || shutDown) { // another task started a watch since, or no more are wanted
            return false;
        }
        watch = Thread.currentThread();
        return true;
    }

    /**
     * Takes no more tasks and waits, until {@code deadline} ({@link System#nanoTime}), for those under way to end: all
     * of them, or, called from one of them, every other. True when they ended in time.
     */
    public boolean shutdownAndAwait(long deadline) {
        executor.shutdown();
        shutDown = true;
        Thread watching = watch;
        if (watching != null) {
            LockSupport.unpark(watching);
        }
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
