package dev.compute.memory.opencl;

import static org.jocl.CL.CL_COMPLETE;
import static org.jocl.CL.CL_EVENT_COMMAND_EXECUTION_STATUS;
import static org.jocl.CL.CL_SUCCESS;

import dev.compute.memory.internal.LibraryThreads;
import dev.compute.memory.spi.CallerFutures;
import dev.compute.memory.spi.CompletionThreads;
import dev.compute.memory.spi.DeviceWaits;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicIntegerFieldUpdater;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import org.jocl.CL;
import org.jocl.Pointer;
import org.jocl.Sizeof;
import org.jocl.cl_command_queue;
import org.jocl.cl_context;
import org.jocl.cl_event;
import org.jspecify.annotations.Nullable;

/**
 * Turns OpenCL events into futures that complete only once the command is {@code CL_COMPLETE} (the pool keeps
 * a closed buffer's memory until then, so completing early would hand out memory a command still uses).
 *
 * <p>One waiter thread takes events in the order they were handed in and blocks in {@code clWaitForEvents}. For the
 * backend's one in-order queue, commands finish in that order: it takes every event handed in so far and waits for
 * the last, which means the others have ended too (one wake-up for a chain of commands, not one each).
 * Work recorded from users' own queues (a second instance) comes from queues that run apart, one of which may never
 * end a command (one behind a user event nobody sets): the waiter polls those events' statuses instead, in growing
 * pauses while none has ended, and settles each as it ends, in any order, so that a stuck queue holds up no other
 * queue's work (a barrier still waits for everything handed in before it). Unlike {@code clSetEventCallback} it needs
 * no native thread attached to the JVM and behaves the same on every driver.
 *
 * <p>A caller's dependent action that waits for a later command must not stall the waiter behind it. A future with
 * dependent actions is completed on a virtual thread of its own; one with none (or only threads blocked in its
 * {@code get} or {@code join}) is completed by the waiter itself, which spares a thread hand-off per command. An
 * action attached in the very instant of that completion may still run on the waiter: a watch thread sees a waiter
 * held inside one completion for {@link #STALL_NANOS} and starts another waiter, which settles the rest and goes on;
 * on an idle device it sleeps until the next completion a waiter runs itself.
 * {@link #close} waits (within a bound) for every completion and action, so the pool's deferred frees have run before
 * the backend releases its context.
 */
final class EventCompletions {

    private static final System.Logger LOG = System.getLogger(EventCompletions.class.getName());

    /**
     * How long the watch must have seen the waiter inside one completion before another waiter takes over: timed from
     * the look that first saw it, so the waiter may stay up to about twice this.
     */
    private static final long STALL_NANOS = TimeUnit.MILLISECONDS.toNanos(50);
    /** Looks of the watch without a completion on a waiter (a second) after which it sleeps until the next one. */
    private static final int IDLE_LOOKS = 20;
    /** How long after a {@link #wakeSoon} the waiter runs the {@link #onWake} action at the latest. */
    static final long WAKE_SOON_NANOS = TimeUnit.MILLISECONDS.toNanos(1);
    /** The first and the longest pause between two polls of recorded work that has not ended. */
    private static final long FIRST_POLL_NANOS = 20_000;
    private static final long LONGEST_POLL_NANOS = TimeUnit.MILLISECONDS.toNanos(1);

    /** A command handed in, with the futures its end completes besides its own ({@code covered}: queue positions). */
    private record Pending(@Nullable cl_event event, EventWork done, String what, List<? extends CompletableFuture<Void>> covered) {
        Pending(@Nullable cl_event event, EventWork done, String what) {
            this(event, done, what, List.of());
        }
    }

    /** A command waited for, to be settled in turn: its futures completed, or failed with {@code failure}. */
    private record Ended(Pending command, @Nullable RuntimeException failure) {}

    /**
     * The waiter inside a completion: one made per completion, so that the watch tells the same completion from the next.
     * It carries no time: the waiter completes every position and op of a chain, and a clock read each time cost it more
     * than the completion; the watch times what it sees itself.
     */
    private record Inside(Thread waiter) {}

    private static final CallersFuture[] NONE = {};
    private static final Pending STOP = new Pending(null, new EventWork(null, true), "stop");
    private static final Pending WAKE = new Pending(null, new EventWork(null, true), "wake");
    private static final Pending WAKE_SOON = new Pending(null, new EventWork(null, true), "wake soon");

    /**
     * A future the waiter completes. It counts the threads blocked in its {@code get} or {@code join}, so that the
     * waiter can tell a future that only wakes them from one with dependent actions.
     */
    abstract static class Awaited extends CompletableFuture<Void> implements CallerFutures.Source<Void> {
        private static final AtomicIntegerFieldUpdater<Awaited> BLOCKED = AtomicIntegerFieldUpdater.newUpdater(Awaited.class, "blocked");
        private volatile int blocked;
        /** The future {@link #forCaller()} hands every caller, once made; under this monitor. */
        private @Nullable CallersFuture caller;
        /**
         * The callers' futures made so far, completed after this one, never the other way, in the order made: the first
         * (most often the only one: an op's) on its own, with no array made for it, then the others.
         */
        private volatile @Nullable CallersFuture firstCaller;
        private volatile CallersFuture[] callers = NONE;

        /**
         * The caller's own future, made once: completed by whoever completes this one, right after it, so that it costs
         * no dependent action here (one would mark a queue position at once); its waits go through this one's.
         */
        @Override
        public final CompletableFuture<Void> forCaller() {
            CallersFuture mine;
            synchronized (this) {
                mine = caller;
                if (mine != null) {
                    return mine;
                }
                mine = new CallersFuture(this, null);
                caller = mine;
            }
            return followedBy(mine);
        }

        /**
         * A caller's future that completes once {@code finish} has run, right after this one completes, on the thread
         * that completes it: no dependent action, so this future still completes where it is waited for (a dependent
         * action would send its completion to a thread of its own).
         */
        @Override
        public final CompletableFuture<Void> forCaller(CallerFutures.Finish finish) {
            return followedBy(new CallersFuture(this, finish));
        }

        private CallersFuture followedBy(CallersFuture mine) {
            synchronized (this) {
                if (firstCaller == null) {
                    firstCaller = mine;
                } else {
                    CallersFuture[] now = Arrays.copyOf(callers, callers.length + 1);
                    now[now.length - 1] = mine;
                    callers = now;
                }
            } // then look: a completion that did not see it yet is seen here
            if (isDone()) {
                mine.follow(this);
            }
            return mine;
        }

        @Override
        public boolean complete(Void value) {
            boolean completed = super.complete(value);
            followed();
            return completed;
        }

        @Override
        public boolean completeExceptionally(Throwable failure) {
            boolean completed = super.completeExceptionally(failure);
            followed();
            return completed;
        }

        private void followed() {
            // read after this one completed: forCaller either sees it done or is seen here
            CallersFuture first = firstCaller;
            if (first != null) {
                first.follow(this);
            }
            for (CallersFuture each : callers) {
                each.follow(this);
            }
        }

        /** Runs before a thread blocks on this future. */
        void beforeBlocking() {
        }

        /**
         * Runs before a thread blocks in {@link #join()}, which no interrupt ends (nor a timeout): as before any other
         * wait, unless the future can wait for its command on the joining thread itself.
         */
        void beforeJoining() {
            beforeBlocking();
        }

        /**
         * Whether completing it runs nothing but the wake-up of threads blocked on it (as far as can be seen now), its
         * callers' futures included.
         */
        final boolean onlyBlockedOn() {
            if (getNumberOfDependents() > blocked) {
                return false;
            }
            CallersFuture first = firstCaller;
            if (first != null && !first.onlyBlockedOn()) {
                return false;
            }
            for (CallersFuture each : callers) {
                if (!each.onlyBlockedOn()) {
                    return false;
                }
            }
            return true;
        }

        @Override
        public final Void get() throws InterruptedException, ExecutionException {
            if (isDone()) {
                return super.get();
            }
            beforeBlocking();
            BLOCKED.incrementAndGet(this);
            try {
                return super.get();
            } finally {
                BLOCKED.decrementAndGet(this);
            }
        }

        @Override
        public final Void get(long timeout, TimeUnit unit) throws InterruptedException, ExecutionException, TimeoutException {
            if (isDone()) {
                return super.get(timeout, unit);
            }
            beforeBlocking();
            BLOCKED.incrementAndGet(this);
            try {
                return super.get(timeout, unit);
            } finally {
                BLOCKED.decrementAndGet(this);
            }
        }

        @Override
        public final Void join() {
            if (isDone()) {
                return super.join();
            }
            beforeJoining();
            if (isDone()) {
                return super.join();
            }
            BLOCKED.incrementAndGet(this);
            try {
                return super.join();
            } finally {
                BLOCKED.decrementAndGet(this);
            }
        }
    }

    /**
     * What a caller holds of a command or a queue position ({@link Awaited#forCaller}): completes with it; a wait on it
     * waits as one on the command does, and a dependent action attached to it asks for the command as one attached to
     * the command would. Cancelling or completing it touches the command's own future in nothing.
     */
    static final class CallersFuture extends Awaited {
        private static final AtomicIntegerFieldUpdater<CallersFuture> FOLLOWED = AtomicIntegerFieldUpdater.newUpdater(CallersFuture.class, "following");
        private final Awaited work;
        private final CallerFutures.@Nullable Finish finish;
        /** Set by the first to follow the work: its completion and the caller's look may both come here. */
        private volatile int following;

        private CallersFuture(Awaited work, CallerFutures.@Nullable Finish finish) {
            this.work = work;
            this.finish = finish;
        }

        /** Completes as {@code done} (complete) did, once its step, if it has one, has run. */
        private void follow(Awaited done) {
            if (!FOLLOWED.compareAndSet(this, 0, 1)) {
                return; // a step runs once
            }
            Throwable failure = null;
            try {
                done.join();
            } catch (CompletionException failed) {
                failure = failed.getCause();
            } catch (CancellationException cancelled) {
                failure = cancelled;
            }
            if (finish != null) {
                failure = CallerFutures.finished(failure, finish);
            }
            if (failure == null) {
                super.complete(null);
            } else {
                super.completeExceptionally(failure);
            }
        }

        @Override
        void beforeBlocking() {
            work.beforeBlocking();
        }

        @Override
        void beforeJoining() {
            work.beforeJoining();
        }

        @Override
        public <U> CompletableFuture<U> newIncompleteFuture() {
            return work.newIncompleteFuture();
        }
    }

    /**
     * A future for a command with the event that marks it, so that the backend's queue can be ordered after the command
     * on the device ({@link #orderQueue}). The event is released once the command has ended, under this future's
     * monitor; {@code null} then (and for a barrier).
     */
    static final class EventWork extends Awaited {
        private @Nullable cl_event event;
        private final boolean onBackendQueue;
        /**
         * The user event the backend's queue waits for in this command's place ({@link #orderQueue}), set complete once
         * the command has ended, well or not; null until a queue is ordered after it.
         */
        private @Nullable cl_event stand;

        EventWork(@Nullable cl_event event, boolean onBackendQueue) {
            this.event = event;
            this.onBackendQueue = onBackendQueue;
        }

        /**
         * Makes what {@code queue} (the backend's in-order queue, in {@code context}) runs next wait for this command, on
         * the device: nothing to do for a command of that queue or one that has ended, well or not, even where the waiter
         * has not settled it yet; else a barrier on a user event of the backend's own that stands for the command and is
         * set complete once it has ended ({@link #releaseEvent}). False where the device cannot (no OpenCL 1.2 barrier):
         * the caller waits on the host. The user's event is never put in a wait list of the backend's queue: its failure
         * would be the queue's (PoCL fails every command queued behind it, leaves a barrier after an event that had failed
         * already queued for ever, and ends the process when the event fails under a barrier of another queue).
         */
        boolean orderQueue(cl_command_queue queue, cl_context context) {
            if (onBackendQueue || isDone()) {
                return true;
            }
            synchronized (this) {
                try {
                    cl_event standing = standIn(context);
                    if (standing == null) {
                        return true;
                    }
                    try {
                        return JoclCalls.clEnqueueBarrierWithWaitList(queue, 1, new cl_event[] {standing}, null) == CL_SUCCESS;
                    } finally {
                        JoclCalls.clReleaseEvent(standing);
                    }
                } catch (RuntimeException | LinkageError noBarrier) {
                    return false;
                }
            }
        }

        /**
         * The event a command of the backend's queue waits for in this command's place, retained for the caller, who
         * releases it: a user event of the backend's in {@code context}, set complete once this command has ended, well
         * or not ({@link #releaseEvent}); null when it has ended already. The user's own event is never put in a wait
         * list of the backend's queue (see {@link #orderQueue}).
         */
        synchronized @Nullable cl_event standIn(cl_context context) {
            if (event == null || hasEnded(event)) {
                return null;
            }
            if (stand == null) {
                int[] error = new int[1];
                cl_event created = JoclCalls.clCreateUserEvent(context, error);
                OpenClCalls.check(error[0], "clCreateUserEvent to stand for recorded work");
                stand = created;
            }
            OpenClCalls.check(JoclCalls.clRetainEvent(stand), "clRetainEvent");
            return stand;
        }

        boolean onBackendQueue() {
            return onBackendQueue;
        }

        /** Once the command has ended: releases its event, and lets the barriers that stand for it go. */
        private synchronized void releaseEvent() {
            if (event != null) {
                JoclCalls.clReleaseEvent(event);
                event = null;
            }
            if (stand != null) {
                JoclCalls.clSetUserEventStatus(stand, CL_COMPLETE);
                JoclCalls.clReleaseEvent(stand);
                stand = null;
            }
        }
    }

    private final boolean onBackendQueue;
    private final String deviceName;
    /** What the waiter does, after waiting for what it took, when it was asked to wake ({@link #wake}). */
    private volatile Runnable onWake = () -> { };

    private final BlockingQueue<Pending> pending = new LinkedBlockingQueue<>();
    /** Commands waited for and not settled yet, in turn: whichever waiter is current settles them. */
    private final ConcurrentLinkedQueue<Ended> ended = new ConcurrentLinkedQueue<>();
    /** The waiter that takes pending commands now; another replaces it when a completion holds it ({@link #watch}). */
    private volatile Thread waiter;
    /** Every waiter started, for close() to wait for. */
    private final List<Thread> waiters = new ArrayList<>();
    /** Set while the waiter completes a future itself. */
    private final AtomicReference<@Nullable Inside> inside = new AtomicReference<>();
    private final Thread watch;
    /** Completions the waiters ran themselves so far; the watch sleeps once {@link #IDLE_LOOKS} looks saw none. */
    private volatile long inlineCompletions;
    /** Set while the watch sleeps for want of completions; the next completion run on a waiter wakes it. */
    private volatile boolean watchIdle;
    private volatile boolean stopped;
    private final CompletionThreads completer = new CompletionThreads(Executors.newVirtualThreadPerTaskExecutor());

    /** {@code onBackendQueue}: the events handed in mark commands of the backend's own in-order queue. */
    EventCompletions(String deviceName, boolean onBackendQueue) {
        this.onBackendQueue = onBackendQueue;
        this.deviceName = deviceName;
        this.waiter = startWaiter();
        watch = LibraryThreads.daemon("opencl-events watch " + deviceName, this::watch);
        watch.start();
    }

    private synchronized Thread startWaiter() {
        Thread started = LibraryThreads.daemon("opencl-events " + deviceName, this::waitInTurn);
        waiters.add(started);
        waiter = started;
        started.start();
        return started;
    }

    /** A future for {@code event}'s command; takes over the event and releases it once the command ends. */
    EventWork completion(cl_event event, String what) {
        EventWork done = new EventWork(event, onBackendQueue);
        pending.add(new Pending(event, done, what));
        return done;
    }

    /** As {@link #completion(cl_event, String)}, and completes {@code covered} with it, in its place. */
    void completion(cl_event event, String what, List<? extends CompletableFuture<Void>> covered) {
        pending.add(new Pending(event, new EventWork(event, onBackendQueue), what, covered));
    }

    /**
     * Fails {@code futures} with {@code failure}, in order, off the caller's thread (their dependent actions may block,
     * or wait through the library for a later one: {@link CompletionThreads#beforeWaiting}).
     */
    void fail(List<? extends CompletableFuture<Void>> futures, RuntimeException failure) {
        completer.executeInOrder(futures.stream().<Runnable>map(future -> () -> future.completeExceptionally(failure)).toList());
    }

    /** Asks the waiter to run {@code action} once it has waited for every command handed in so far. */
    void onWake(Runnable action) {
        onWake = action;
    }

    /** Wakes the waiter (cheap when it is busy): it runs the {@link #onWake} action after the commands it holds. */
    void wake() {
        pending.add(WAKE);
    }

    /**
     * Asks the waiter to run the {@link #onWake} action within {@link #WAKE_SOON_NANOS}, or sooner on a {@link #wake}:
     * what is asked for meanwhile shares one run.
     */
    void wakeSoon() {
        pending.add(WAKE_SOON);
    }

    /** A future that completes once every command handed in before it has ended. */
    CompletableFuture<Void> barrier() {
        EventWork done = new EventWork(null, onBackendQueue);
        pending.add(new Pending(null, done, "barrier"));
        return done;
    }

    /** When the waiter runs the {@link #onWake} action that {@link #wakeSoon} asked for; 0 when none is asked for. */
    private volatile long wakeDue;

    /**
     * Recorded work handed in and not settled yet, in the order handed in (work of users' queues only): the current
     * waiter's, handed on to the next one with the rest of its state when the watch replaces it.
     */
    private final List<Pending> outstanding = new ArrayList<>();
    /** The pause before the next poll of {@link #outstanding}: doubled after each poll that found nothing ended. */
    private long pollPause = FIRST_POLL_NANOS;

    /** Every future the waiters have handed to the completer so far, as one; the current waiter's. */
    private volatile CompletableFuture<?> handedOut = CompletableFuture.completedFuture(null);

    private void waitInTurn() {
        List<Pending> batch = new ArrayList<>();
        while (settle()) {
            try {
                Pending first = next(nextDue());
                if (first != null) {
                    batch.add(first);
                    pending.drainTo(batch);
                }
            } catch (InterruptedException e) {
                // only close() stops this thread, after every pending command has finished
                continue;
            }
            int stop = batch.indexOf(STOP);
            List<Pending> commands = stop < 0 ? batch : batch.subList(0, stop);
            boolean woken = commands.removeIf(next -> next == WAKE);
            if (commands.removeIf(next -> next == WAKE_SOON) && wakeDue == 0) {
                wakeDue = System.nanoTime() + WAKE_SOON_NANOS | 1; // never 0
            }
            if (wakeDue != 0 && (woken || stop >= 0 || System.nanoTime() - wakeDue >= 0)) {
                woken = true;
                wakeDue = 0;
            }
            if (onBackendQueue) {
                awaitLast(commands); // an in-order queue: once the last has ended, every command before it has too
                for (Pending next : commands) {
                    ended.add(new Ended(next, await(next)));
                }
            } else {
                outstanding.addAll(commands);
                settleEnded(stop >= 0);
            }
            if (woken) {
                ended.add(new Ended(WAKE, null));
            }
            if (stop >= 0) {
                ended.add(new Ended(STOP, null));
            }
            batch.clear();
        }
    }

    /** When the waiter stops waiting for the next command: the wake asked for, or the next poll of recorded work; 0: never. */
    private long nextDue() {
        long due = wakeDue;
        if (outstanding.isEmpty()) {
            return due;
        }
        long poll = System.nanoTime() + pollPause | 1; // never 0
        return due == 0 || poll - due < 0 ? poll : due;
    }

    /**
     * Hands the recorded work that has ended to be settled, in any order (a barrier once everything before it has gone),
     * and keeps the rest; with {@code all} (on close, once the caller saw all of it end) waits for the rest.
     */
    private void settleEnded(boolean all) {
        boolean any = false;
        boolean earlierLeft = false;
        for (Iterator<Pending> it = outstanding.iterator(); it.hasNext(); ) {
            Pending next = it.next();
            cl_event event = next.event();
            if (event == null ? earlierLeft : !all && !hasEnded(event)) {
                earlierLeft = true;
                continue;
            }
            it.remove();
            ended.add(new Ended(next, await(next)));
            any = true;
        }
        pollPause = any ? FIRST_POLL_NANOS : Math.min(2 * pollPause, LONGEST_POLL_NANOS);
    }

    /** Whether {@code event}'s command has ended, well or not; a status that cannot be read counts as ended ({@link #await} says so). */
    private static boolean hasEnded(cl_event event) {
        int[] status = new int[1];
        return status(event, status) != CL_SUCCESS || status[0] <= CL_COMPLETE;
    }

    /** The next command handed in, waiting until {@code due} at most (when not 0): null then. */
    private @Nullable Pending next(long due) throws InterruptedException {
        if (due == 0) {
            return pending.take();
        }
        long left = due - System.nanoTime();
        return left <= 0 ? pending.poll() : pending.poll(left, TimeUnit.NANOSECONDS);
    }

    /**
     * Settles the commands waited for, in turn; false once it settled the stop, or when another waiter has taken over
     * from this one.
     */
    private boolean settle() {
        Ended next;
        while (Thread.currentThread() == waiter && (next = ended.poll()) != null) {
            Pending command = next.command();
            if (command == STOP) {
                return false;
            }
            if (command == WAKE) {
                try {
                    onWake.run();
                } catch (RuntimeException e) {
                    LOG.log(System.Logger.Level.WARNING, "marking the queue's positions failed", e);
                }
            } else if (command.event() == null) { // a barrier: done once every future handed out before it is, whatever the completer's order
                EventWork barrier = command.done();
                handedOut.handle((ignored, failed) -> barrier.complete(null));
                handedOut = barrier;
            } else {
                complete(command.done(), next.failure());
                for (CompletableFuture<Void> covered : command.covered()) {
                    complete(covered, next.failure());
                }
            }
        }
        return Thread.currentThread() == waiter;
    }

    /** Completes {@code future} here when that runs no dependent action; else on a virtual thread of its own. */
    private void complete(CompletableFuture<Void> future, @Nullable RuntimeException failure) {
        boolean here = future instanceof Awaited awaited ? awaited.onlyBlockedOn() : future.getNumberOfDependents() == 0;
        if (!here) {
            completer.execute(() -> settle(future, failure));
            handedOut = CompletableFuture.allOf(handedOut, future);
            return;
        }
        Inside mark = new Inside(Thread.currentThread());
        inside.set(mark);
        inlineCompletions++; // the waiters take turns: a count the watch only compares, so a lost step does no harm
        if (watchIdle) { // read after inside is set: the watch sets watchIdle before it reads inside, so one of us sees the other
            watchIdle = false;
            LockSupport.unpark(watch);
        }
        try {
            settle(future, failure);
        } finally {
            inside.compareAndSet(mark, null);
        }
    }

    private static void settle(CompletableFuture<Void> future, @Nullable RuntimeException failure) {
        if (failure == null) {
            future.complete(null);
        } else {
            future.completeExceptionally(failure);
        }
    }

    /**
     * Looks at the waiter now and then: one held inside a completion (an action attached in its instant runs there and
     * blocks) is replaced by a new waiter, which settles the rest and goes on; the old one ends once it returns.
     */
    private void watch() {
        Inside seen = null;
        long seenSince = 0; // when a look first saw it: it has been inside at least since then
        long countSeen = -1;
        int quietLooks = 0;
        while (!stopped) {
            LockSupport.parkNanos(STALL_NANOS);
            Inside now = inside.get();
            long lookedAt = System.nanoTime();
            if (now != null && now == seen && lookedAt - seenSince >= STALL_NANOS) {
                takeOver(now.waiter());
            }
            if (now != seen) {
                seenSince = lookedAt;
            }
            seen = now;
            long count = inlineCompletions;
            quietLooks = now == null && count == countSeen ? quietLooks + 1 : 0;
            countSeen = count;
            if (quietLooks >= IDLE_LOOKS) { // an idle device: sleep until the next completion the waiter runs itself
                watchIdle = true;
                if (inside.get() == null && !stopped) {
                    LockSupport.park(this);
                }
                watchIdle = false;
                quietLooks = 0;
            }
        }
    }

    private synchronized void takeOver(Thread held) {
        if (waiter == held && !stopped) {
            LOG.log(System.Logger.Level.DEBUG, () -> "an action dependent on an OpenCL command holds " + held.getName() + "; another waiter goes on");
            startWaiter();
        }
    }

    /** Waits for the last command of {@code commands} that has an event, so that the rest need no wait of their own. */
    private static void awaitLast(List<Pending> commands) {
        for (int i = commands.size() - 1; i >= 0; i--) {
            cl_event event = commands.get(i).event();
            if (event != null) {
                JoclCalls.clWaitForEvents(1, new cl_event[] {event}); // its status, and any failure, is read in await
                return;
            }
        }
    }

    /** Waits for {@code next}'s command unless its status says it has ended; its failure, or null. Releases the event. */
    private static @Nullable RuntimeException await(Pending next) {
        cl_event event = next.event();
        if (event == null) {
            return null; // a barrier: reaching it is all it waits for
        }
        try {
            int[] status = new int[1];
            int asked = status(event, status);
            int waited = CL_SUCCESS;
            if (asked == CL_SUCCESS && status[0] > CL_COMPLETE) { // not ended yet
                waited = JoclCalls.clWaitForEvents(1, new cl_event[] {event});
                asked = status(event, status);
            }
            if (asked != CL_SUCCESS) {
                return OpenClCalls.failure(asked, "clGetEventInfo for " + next.what());
            }
            if (status[0] < 0) {
                return OpenClCalls.failure(status[0], next.what());
            }
            if (waited != CL_SUCCESS) {
                return OpenClCalls.failure(waited, "clWaitForEvents for " + next.what());
            }
            return null;
        } catch (RuntimeException e) {
            return e;
        } finally {
            next.done().releaseEvent();
        }
    }

    /**
     * Waits on the calling thread for {@code event}'s command: true once it has ended well; false when it failed or
     * could not be waited for, which the waiter, holding the event too, reports on the futures.
     */
    static boolean awaitHere(cl_event event) {
        int[] status = new int[1];
        return JoclCalls.clWaitForEvents(1, new cl_event[] {event}) == CL_SUCCESS && status(event, status) == CL_SUCCESS && status[0] == CL_COMPLETE;
    }

    /**
     * Polls {@code event}'s status on the calling thread until its command has ended (well or not) or {@code bound} has
     * passed: a bounded wait, which {@code clWaitForEvents} is not ({@link DeviceWaits}).
     */
    static boolean endsWithin(cl_event event, Duration bound) {
        int[] status = new int[1];
        // a status that cannot be read ends the wait too: nothing would say when the command ends
        return DeviceWaits.until(() -> status(event, status) != CL_SUCCESS || status[0] <= CL_COMPLETE,
                System.nanoTime() + bound.toNanos());
    }

    private static int status(cl_event event, int[] status) {
        return JoclCalls.clGetEventInfo(event, CL_EVENT_COMMAND_EXECUTION_STATUS, Sizeof.cl_int, Pointer.to(status), null);
    }

    /**
     * Stops the waiter once every command handed to it has completed (the caller has finished the queue) and waits, at
     * most {@code bound}, until every future has been completed and its dependent actions have run. False when a
     * waiter or an action was still running then (a caller's action that blocks): the caller keeps what they may use.
     * An interrupt does not cut the wait short; it is kept for the caller.
     */
    boolean close(Duration bound) {
        long deadline = System.nanoTime() + bound.toNanos();
        pending.add(STOP);
        boolean interrupted = false;
        boolean settled = true;
        int joined = 0;
        try {
            while (settled) {
                Thread next;
                synchronized (this) {
                    if (joined == waiters.size()) {
                        stopped = true;
                        break;
                    }
                    next = waiters.get(joined);
                }
                if (next == Thread.currentThread()) {
                    // closed by an action the waiter ran itself (attached in the instant it completed a future): it
                    // waits for the others, not for itself, which goes on to settle what is left once this returns
                    joined++;
                    continue;
                }
                long left;
                while (next.isAlive() && (left = deadline - System.nanoTime()) > 0) {
                    try {
                        next.join(Duration.ofNanos(left));
                    } catch (InterruptedException e) {
                        interrupted = true;
                    }
                }
                settled = !next.isAlive();
                joined++;
            }
            LockSupport.unpark(watch);
            // closed by a dependent action, a task of the completer, it waits for the others, not for itself
            boolean completed = completer.shutdownAndAwait(settled ? deadline : System.nanoTime());
            return settled && completed;
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
