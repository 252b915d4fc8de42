package dev.compute.memory.manager;

import dev.compute.memory.AllocationAboveLimitException;
import dev.compute.memory.DataType;
import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.MemoryEventListener;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.internal.LibraryThreads;
import dev.compute.memory.internal.ManagerLog;
import dev.compute.memory.internal.WithdrawnFirst;
import dev.compute.memory.lifetime.LeakDetector;
import dev.compute.memory.resource.DeviceWork;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedDeque;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Consumer;
import java.util.function.Predicate;
import java.util.function.Supplier;
import java.util.function.UnaryOperator;
import org.jspecify.annotations.Nullable;

/**
 * Requests waiting for memory ({@link UnifiedMemoryManager#allocateAsync}): one first-in, first-out queue per
 * location, retried from its head when a buffer there is given back, each request bounded by its own timeout.
 *
 * <p><b>Order.</b> Only a queue's head is tried. A request that finds others waiting joins the tail without trying,
 * so a later small request never takes the memory an earlier large one waits for; the head that cannot be served
 * holds everyone behind it until it is served, times out or is cancelled. But for a budget's request within its
 * reservation, which the pool keeps from everyone else: its first attempt is made at once, since it takes nothing the
 * others wait for.
 *
 * <p><b>Wake-ups.</b> The manager calls {@link #released} for every block given back; with nobody waiting that is
 * one volatile read (when device work on the block is done: read then). Otherwise it signals the location's queue,
 * and the waiter thread serves the queue. Signals are counted, and the thread serves again until it has seen them all, as
 * RxJava drains its queues: a buffer closed while the head is being tried makes it be tried once more, never lost.
 * A request that becomes the head signals too, since memory may have come back between its first attempt and its
 * joining the queue, as does the removal of a head that timed out or was cancelled, since the next may fit.
 *
 * <p><b>Threads.</b> Two daemon threads, made when requests wait and gone {@value #IDLE_SECONDS} s after the last:
 * one tries the heads (an attempt may run the out-of-memory handlers or wait for device work; a request's first
 * attempt, on its caller's thread, does neither: {@link DeviceWork#withoutWaiting}), one fires the
 * timeouts, so that a slow attempt never delays a timeout: only a request with an {@code unserved} (a budget's) that
 * times out, or meets the manager's close, while an attempt is under way for it fails as that attempt ends, once its
 * bytes are given back (after a close, at the latest at its close timeout). Neither
 * runs on a thread that closes a buffer.
 */
public final class AllocationWaiters<B> {

    /** The manager's allocation, telling no listener of a failure: a failed retry is not yet the request's failure. */
    @FunctionalInterface
    public interface Allocation<B> {
        B allocate(DataType type, MemoryLocation location, long bytes);
    }

    /** A location's figures: requests queued now, requests that ever queued, and those that timed out. */
    public record Figures(long waiting, long waits, long timeouts) {}

    /**
     * What a budget's request brings beside what any request does.
     *
     * @param withinReservation whether it is within its budget's reservation, whose room the pool keeps from everyone
     *                          else: tried at once though others wait, since it takes nothing they wait for; if it fails
     *                          it joins the tail
     * @param servedAs          wraps each attempt made for it, on the caller's thread or the waiter thread, as its budget's
     *                          own request (a reserving budget's is served from memory kept for reservations)
     * @param unserved          runs once where the request ends without its buffer, once no memory is held for it (a
     *                          buffer made for it as it was cancelled is given back first): a budget counts the request's
     *                          bytes until then, so that what its books let go of the pool has
     * @param reached           asked once, as the request reaches the pool, before anything is tried or queued for it:
     *                          with null where it is about to be tried on this thread, else with its future, about to be
     *                          queued. False (its holder ended it first): nothing is tried, queued or told for it, and the
     *                          future returned is cancelled; null: never ended before it reaches the pool
     */
    public record BudgetTerms<B>(boolean withinReservation, UnaryOperator<Supplier<B>> servedAs, Runnable unserved,
                                 @Nullable Predicate<@Nullable CompletableFuture<B>> reached) {}

    private static final class Waiter<B> {
        final DataType type;
        final MemoryLocation location;
        final long bytes;
        final Duration timeout;
        /** The wait its caller asked for, which a timeout's message says: a budget's request spent part of it in the budget's queue. */
        final Duration asked;
        final CompletableFuture<B> future;
        /** Set by whichever of serving, timing out, closing and its caller ends the request; the others then leave it alone. */
        private final AtomicBoolean settled = new AtomicBoolean();
        /** {@link #QUEUED}, {@link #SERVING} while an attempt may make a buffer for it, {@link #ENDED} once told. */
        private final AtomicInteger attempt = new AtomicInteger(QUEUED);
        private final @Nullable Runnable unserved;
        private final UnaryOperator<Supplier<B>> servedAs;
        /**
         * Where it was asked for, for its allocation site and recorded call site when another thread serves it: one
         * stack walk for a request that found no memory, never for one served at once.
         */
        final List<StackTraceElement> askedAt = LeakDetector.callerFrames(Integer.MAX_VALUE);
        /** Completes once {@code unserved} has run. */
        private final CompletableFuture<Void> unservedTold = new CompletableFuture<>();
        /** Its own last refusal once tried; until then the refusal of the request ahead of it when it joined. */
        volatile DeviceOutOfMemoryException refusal;
        volatile boolean tried;
        volatile @Nullable ScheduledFuture<?> timer;

        /** {@code leave}: takes an ended request off its queue. */
        Waiter(DataType type, MemoryLocation location, long bytes, Duration timeout, Duration asked, DeviceOutOfMemoryException refusal,
               boolean tried, Consumer<Waiter<?>> leave, @Nullable BudgetTerms<B> terms) {
            this.type = type;
            this.location = location;
            this.bytes = bytes;
            this.timeout = timeout;
            this.asked = asked;
            this.refusal = refusal;
            this.tried = tried;
            this.unserved = terms == null ? null : terms.unserved();
            this.servedAs = terms == null ? UnaryOperator.identity() : terms.servedAs();
            // ended by its caller (cancelled, or completed as orTimeout does), the request leaves its queue before its
            // functions run, as it does when served, timed out or failed at a close: none sees it counted as waiting
            this.future = new WithdrawnFirst<>() {
                @Override
                protected void withdraw() {
                    if (settle()) {
                        leave.accept(Waiter.this);
                        endedWithoutBuffer();
                    }
                }
            };
        }

        boolean settle() {
            return settled.compareAndSet(false, true);
        }

        /** An attempt begins: false where the request has ended, and nothing may be made for it. */
        boolean beginAttempt() {
            return attempt.compareAndSet(QUEUED, SERVING);
        }

        /** The attempt's buffer went to the request's future. */
        void handedOver() {
            attempt.set(ENDED);
        }

        /**
         * The attempt ended, its buffer, if any, given back: where the request ended meanwhile, it is told now, as
         * {@link #endedWithoutBuffer} could not while the attempt was under way.
         */
        void endAttempt() {
            attempt.set(QUEUED);
            if (future.isDone() || settled.get()) { // settled: timed out meanwhile, its failure waiting for this
                endedWithoutBuffer();
            }
        }

        /** The attempt failed, and the request with it (or its caller ended it meanwhile): told now, before it fails. */
        void attemptFailed() {
            attempt.set(QUEUED);
            endedWithoutBuffer();
        }

        /**
         * The request ended without a buffer (cancelled, timed out, failed, the manager closed): {@code unserved} runs
         * once, now, or, where an attempt may be making a buffer for it, once that attempt has given it back. Called
         * before the future fails where nothing is being made for it, so that its functions see the bytes given back.
         */
        void endedWithoutBuffer() {
            if (unserved != null && attempt.compareAndSet(QUEUED, ENDED)) {
                try {
                    unserved.run();
                } finally {
                    unservedTold.complete(null);
                }
            }
        }

        /** Runs {@code failing} once {@code unserved} has run: at once, or as the attempt under way for it ends. */
        void failOnceUnservedTold(Runnable failing) {
            if (unserved == null) {
                failing.run();
            } else {
                unservedTold.whenComplete((told, failure) -> failing.run());
            }
        }
    }

    private static final int QUEUED = 0;
    private static final int SERVING = 1;
    private static final int ENDED = 2;

    private static final class LocationQueue {
        final ConcurrentLinkedDeque<Waiter<?>> waiters = new ConcurrentLinkedDeque<>();
        final AtomicInteger waiting = new AtomicInteger();
        /** Signals not yet served; the thread that raises it from 0 starts the serving. */
        final AtomicInteger signals = new AtomicInteger();
        final LongAdder waits = new LongAdder();
        final LongAdder timeouts = new LongAdder();
        /** The latest refusal of a request here: what a request that waited behind others is told when it times out. */
        volatile @Nullable DeviceOutOfMemoryException latestRefusal;

        /** Counted before it can be served, and as a wait before as waiting: no reader sees fewer than none, or more than ever waited. */
        void add(Waiter<?> waiter) {
            waits.increment();
            waiting.incrementAndGet();
            waiters.addLast(waiter);
        }

        void remove(Waiter<?> waiter) {
            if (waiters.removeFirstOccurrence(waiter)) {
                waiting.decrementAndGet();
            }
        }
    }

    private static final System.Logger LOG = ManagerLog.logger();
    private static final ThreadFactory THREADS = LibraryThreads.daemons("compute-memory-waiters-", true);
    /** Where a request the close failed fails at the close timeout, its attempt still under way. */
    private static final Executor CLOSED_REQUEST_FAILURES = Executors.newThreadPerTaskExecutor(LibraryThreads.virtual("compute-memory-closed-request-"));
    /** How long an idle waiter thread stays (seconds): a service that never waits keeps none. */
    static final int IDLE_SECONDS = 10;

    private final Allocation<B> allocation;
    /** Gives back a buffer that was allocated for a request that ended meanwhile. */
    private final Consumer<B> discard;
    private final MemoryEventListener events;
    private final LocationQueue[] queues = new LocationQueue[MemoryLocation.values().length];
    private @Nullable ScheduledThreadPoolExecutor timer;
    private @Nullable ThreadPoolExecutor server;
    private volatile boolean closed;

    public AllocationWaiters(Allocation<B> allocation, Consumer<B> discard, MemoryEventListener events) {
        this.allocation = allocation;
        this.discard = discard;
        this.events = events;
        for (int i = 0; i < queues.length; i++) {
            queues[i] = new LocationQueue();
        }
    }

    /**
     * {@code bytes} at {@code location} now, or once buffers given back make room, within {@code timeout}. Fails at
     * once for a request above {@code capBytes} (the cap, or the backend's largest single allocation where smaller) or
     * above a limit composed into the chain ({@link AllocationAboveLimitException}: no free can make room for either), or
     * with a zero timeout. The caller
     * has checked the arguments. Whatever else the first attempt throws (an out-of-memory handler's own failure) fails
     * the future, as it does on the waiter thread.
     */
    public CompletableFuture<B> request(DataType type, MemoryLocation location, long bytes, long capBytes, Duration timeout) {
        return request(type, location, bytes, capBytes, timeout, timeout, null);
    }

    /**
     * As {@link #request(DataType, MemoryLocation, long, long, Duration)}, for a budget's request where {@code terms} is
     * not null (see {@link BudgetTerms}). {@code asked}: the whole wait its caller asked for, of which {@code timeout} is
     * what is left, for the message.
     */
    public CompletableFuture<B> request(DataType type, MemoryLocation location, long bytes, long capBytes, Duration timeout,
                                        Duration asked, @Nullable BudgetTerms<B> terms) {
        boolean withinReservation = terms != null && terms.withinReservation();
        @Nullable Runnable unserved = terms == null ? null : terms.unserved();
        @Nullable Predicate<@Nullable CompletableFuture<B>> reached = terms == null ? null : terms.reached();
        UnaryOperator<Supplier<B>> servedAs = terms == null ? UnaryOperator.identity() : terms.servedAs();
        LocationQueue queue = queues[location.ordinal()];
        DeviceOutOfMemoryException refusal = queue.latestRefusal;
        boolean tried = false;
        if (withinReservation || queue.waiters.isEmpty() || refusal == null || bytes > capBytes) {
            if (reached != null && !reached.test(null)) {
                return endedBeforeReaching();
            }
            try {
                // on the caller's thread, which asked not to wait: any wait (device work, a trim, a handler) is the waiter thread's
                return CompletableFuture.completedFuture(DeviceWork.withoutWaiting(servedAs.apply(() -> allocation.allocate(type, location, bytes))));
            } catch (DeviceOutOfMemoryException e) {
                refusal = e;
                tried = true;
            } catch (Throwable e) {
                // an out-of-memory handler's own failure, checked ones too: the request's, as on the waiter thread
                runUnserved(unserved);
                return CompletableFuture.failedFuture(e);
            }
            if (bytes > capBytes || refusal instanceof AllocationAboveLimitException) {
                runUnserved(unserved);
                return failed(location, bytes, refusal);
            }
            queue.latestRefusal = refusal;
        }
        Waiter<B> waiter = new Waiter<>(type, location, bytes, timeout, asked, refusal, tried, ended -> withdraw(queue, ended), terms);
        if (!tried && reached != null && !reached.test(waiter.future)) {
            waiter.settle(); // never queued: an ending of its future changes nothing
            return endedBeforeReaching();
        }
        if (timeout.isZero()) {
            runUnserved(unserved);
            return failed(location, bytes, timedOut(waiter, queue));
        }
        queue.add(waiter);
        waiter.future.whenComplete((buffer, failure) -> {
            left(queue, waiter);
            if (failure != null) {
                waiter.endedWithoutBuffer();
            }
        });
        ScheduledFuture<?> timeoutTimer;
        try {
            timeoutTimer = timer().schedule(() -> timeOut(queue, waiter), TimeUnit.NANOSECONDS.convert(timeout), TimeUnit.NANOSECONDS);
        } catch (RejectedExecutionException e) {
            if (waiter.settle()) {
                waiter.endedWithoutBuffer();
                waiter.future.completeExceptionally(closedWhileWaiting()); // closed as it joined
            }
            return waiter.future;
        }
        waiter.timer = timeoutTimer;
        if (waiter.future.isDone()) {
            // served as it joined, before its timer was set, so left() found none to cancel: else the timer would hold
            // the request and its buffer for the whole wait
            timeoutTimer.cancel(false);
            return waiter.future;
        }
        if (queue.waiters.peekFirst() == waiter) {
            signal(queue);
        }
        return waiter.future;
    }

    private static <B> CompletableFuture<B> endedBeforeReaching() {
        return CompletableFuture.failedFuture(new CancellationException("the request ended before it reached the pool"));
    }

    private static void runUnserved(@Nullable Runnable unserved) {
        if (unserved != null) {
            unserved.run();
        }
    }

    private CompletableFuture<B> failed(MemoryLocation location, long bytes, DeviceOutOfMemoryException failure) {
        events.allocationFailed(location, bytes, failure.reason());
        return CompletableFuture.failedFuture(failure);
    }

    /** Memory came back at {@code location}, or will when {@code inFlight} completes: the queue there is served again. */
    /** Room appeared at {@code location} without memory coming back (a budget's reservation given up): the head tries again. */
    public void roomAppeared(MemoryLocation location) {
        signalIfWaiting(queues[location.ordinal()]);
    }

    void released(MemoryLocation location, CompletableFuture<?> inFlight) {
        LocationQueue queue = queues[location.ordinal()];
        if (inFlight.isDone()) {
            signalIfWaiting(queue);
        } else {
            // whoever waits when the work ends is served, though nobody waited at the close: a request that joins
            // after that signals itself as the head
            inFlight.whenComplete((result, failure) -> signalIfWaiting(queue));
        }
    }

    private void signalIfWaiting(LocationQueue queue) {
        if (queue.waiting.get() != 0) {
            signal(queue);
        }
    }

    Figures figures(MemoryLocation location) {
        LocationQueue queue = queues[location.ordinal()];
        // read in the reverse of the order they are raised in: a request counted as timed out is no longer waiting,
        // and one waiting is counted in the waits
        long timeouts = queue.timeouts.sum();
        long waiting = queue.waiting.get();
        return new Figures(waiting, queue.waits.sum(), timeouts);
    }

    /**
     * Fails every waiting request and stops the threads; later requests fail as they queue. A request with an
     * {@code unserved} (a budget's) whose attempt is under way fails as that attempt ends, once its bytes are back, as
     * when it times out; at the latest {@code closeTimeout} from now, its bytes then still held by the attempt.
     */
    void close(Duration closeTimeout) {
        closed = true;
        synchronized (this) {
            if (timer != null) {
                // its pending timeouts are dropped; no interrupt: a request's function on it may be what closes
                timer.shutdown();
            }
            if (server != null) {
                server.shutdown(); // an attempt under way ends on its own, against the closed manager
            }
        }
        for (LocationQueue queue : queues) {
            for (Waiter<?> waiter; (waiter = queue.waiters.pollFirst()) != null; ) {
                queue.waiting.decrementAndGet();
                if (waiter.settle()) {
                    waiter.endedWithoutBuffer();
                    CompletableFuture<?> request = waiter.future;
                    Runnable failing = () -> request.completeExceptionally(closedWhileWaiting());
                    waiter.failOnceUnservedTold(failing);
                    if (!request.isDone()) {
                        // timed by the JDK's delayer, which drops its task once the request fails first; the failure runs on
                        // a thread of its own, as the request's functions run there
                        CompletableFuture<Void> timedOut = new CompletableFuture<Void>()
                                .completeOnTimeout(null, TimeUnit.NANOSECONDS.convert(closeTimeout), TimeUnit.NANOSECONDS);
                        request.whenComplete((buffer, failure) -> timedOut.cancel(false));
                        timedOut.thenRunAsync(failing, CLOSED_REQUEST_FAILURES);
                    }
                }
            }
        }
    }

    private static IllegalStateException closedWhileWaiting() {
        return new IllegalStateException("this UnifiedMemoryManager was closed while the request waited for memory");
    }

    // ---- serving --------------------------------------------------------------------------------------------------

    private void signal(LocationQueue queue) {
        if (queue.signals.getAndIncrement() == 0) {
            try {
                server().execute(() -> serve(queue));
            } catch (RejectedExecutionException e) {
                // closed: close() fails every waiter
            }
        }
    }

    /** Serves the queue until every signal raised meanwhile has been seen. */
    private void serve(LocationQueue queue) {
        int seen = 1;
        do {
            try {
                serveHeads(queue);
            } catch (Throwable e) {
                // whatever went wrong, the signals are counted down: else no later close would wake this queue again
                LOG.log(System.Logger.Level.WARNING, "serving the requests waiting for memory failed", e);
            }
            seen = queue.signals.addAndGet(-seen);
        } while (seen != 0);
    }

    /** Serves heads in order until one cannot be served (it keeps its place) or the queue is empty. */
    private void serveHeads(LocationQueue queue) {
        for (Waiter<?> next; (next = queue.waiters.peekFirst()) != null; ) {
            @SuppressWarnings("unchecked") // every waiter of this object is a Waiter<B>
            Waiter<B> head = (Waiter<B>) next;
            if (head.future.isDone() || !head.beginAttempt()) {
                queue.remove(head);
                continue;
            }
            B buffer;
            try {
                buffer = LeakDetector.servedAsAskedAt(head.askedAt, head.servedAs.apply(() -> allocation.allocate(head.type, head.location, head.bytes)));
            } catch (AllocationAboveLimitException e) {
                // above a limit composed into the chain: no free can make room for it, and it would hold up those behind it
                queue.remove(head);
                head.attemptFailed();
                if (head.settle()) {
                    try {
                        events.allocationFailed(head.location, head.bytes, e.reason());
                    } finally {
                        head.future.completeExceptionally(e);
                    }
                }
                continue;
            } catch (DeviceOutOfMemoryException e) {
                head.refusal = e;
                head.tried = true;
                queue.latestRefusal = e;
                head.endAttempt();
                return;
            } catch (Throwable e) {
                // an out-of-memory handler's own failure (an Error too): it is this request's, and the queue goes on
                queue.remove(head);
                head.attemptFailed();
                if (head.settle()) {
                    head.future.completeExceptionally(e);
                }
                continue;
            }
            queue.remove(head);
            if (head.settle() && head.future.complete(buffer)) {
                head.handedOver();
            } else {
                try {
                    discard.accept(buffer); // timed out or cancelled while it was tried: the memory goes back, and wakes the next
                } finally {
                    head.endAttempt();
                }
            }
        }
    }

    /** A waiter's future completed, however: off the queue and its timer off. */
    private void left(LocationQueue queue, Waiter<?> waiter) {
        withdraw(queue, waiter);
        ScheduledFuture<?> pendingTimer = waiter.timer;
        if (pendingTimer != null) {
            pendingTimer.cancel(false);
        }
    }

    /** Takes a waiter off its queue, if it is still there; the next is tried if it was the head. */
    private void withdraw(LocationQueue queue, Waiter<?> waiter) {
        boolean wasHead = queue.waiters.peekFirst() == waiter;
        queue.remove(waiter);
        if (wasHead) {
            signal(queue);
        }
    }

    /**
     * Counted, off the queue and told to listeners before the future fails, so that whoever it wakes sees all of it;
     * the future fails whatever happens on the way.
     */
    private void timeOut(LocationQueue queue, Waiter<?> waiter) {
        if (waiter.future.isDone() || !waiter.settle()) {
            return;
        }
        DeviceOutOfMemoryException failure = timedOut(waiter, queue);
        try {
            withdraw(queue, waiter);
            waiter.endedWithoutBuffer();
            queue.timeouts.increment(); // once off the queue: never counted as waiting and timed out at once
            events.allocationFailed(waiter.location, waiter.bytes, failure.reason());
        } finally {
            // where an attempt under way for it holds its unserved back, it fails as that attempt ends: whoever sees the
            // failure sees the request's bytes given back (a budget's claim), as when nothing was being made for it
            waiter.failOnceUnservedTold(() -> waiter.future.completeExceptionally(failure));
        }
    }

    /** The last refusal, the request's own or, if it waited behind others all along, theirs; with the wait said. */
    private static DeviceOutOfMemoryException timedOut(Waiter<?> waiter, LocationQueue queue) {
        DeviceOutOfMemoryException latest = queue.latestRefusal;
        boolean own = waiter.tried || latest == null;
        DeviceOutOfMemoryException last = own ? waiter.refusal : latest;
        DeviceOutOfMemoryException failure = new DeviceOutOfMemoryException(waiter.location, waiter.bytes, last.reason(),
                "no " + waiter.location + " memory for " + waiter.bytes + " bytes within the wait of " + waiter.asked.toMillis() + " ms"
                + (own ? "" : ", behind earlier requests, which are served first") + "; the last attempt: " + last.getMessage());
        failure.initCause(last);
        return failure;
    }

    private synchronized ScheduledThreadPoolExecutor timer() {
        if (closed) {
            throw new RejectedExecutionException("closed");
        }
        if (timer == null) {
            timer = new ScheduledThreadPoolExecutor(1, THREADS);
            timer.setRemoveOnCancelPolicy(true);
            timer.setExecuteExistingDelayedTasksAfterShutdownPolicy(false);
            timer.setKeepAliveTime(IDLE_SECONDS, TimeUnit.SECONDS);
            timer.allowCoreThreadTimeOut(true);
        }
        return timer;
    }

    private synchronized ExecutorService server() {
        if (closed) {
            throw new RejectedExecutionException("closed");
        }
        if (server == null) {
            server = new ThreadPoolExecutor(1, 1, IDLE_SECONDS, TimeUnit.SECONDS, new LinkedBlockingQueue<>(), THREADS);
            server.allowCoreThreadTimeOut(true);
        }
        return server;
    }
}
