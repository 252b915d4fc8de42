package dev.compute.memory.cuda;

import dev.compute.memory.internal.LibraryThreads;
import static dev.compute.memory.cuda.DriverCalls.cuEventCreate;
import static dev.compute.memory.cuda.DriverCalls.cuEventDestroy;
import static dev.compute.memory.cuda.DriverCalls.cuEventQuery;
import static dev.compute.memory.cuda.DriverCalls.cuEventRecord;
import static dev.compute.memory.cuda.DriverCalls.cuEventSynchronize;
import static dev.compute.memory.cuda.DriverCalls.cuStreamQuery;
import static dev.compute.memory.cuda.DriverCalls.cuStreamWaitEvent;

import dev.compute.memory.DeviceTimeoutException;
import dev.compute.memory.spi.BackendSettings;
import dev.compute.memory.spi.CompletionThreads;
import dev.compute.memory.spi.DeviceWaits;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import jcuda.driver.CUevent;
import jcuda.driver.CUevent_flags;
import jcuda.driver.CUstream;
import org.jspecify.annotations.Nullable;

/**
 * Futures that complete when device work has finished. {@link #record} puts an event behind the work on its
 * stream; {@link #position} puts nothing there: it is a place on one of the backend's streams, which the waiter thread
 * covers with one event of its own (a marker) recorded behind every position made so far, so that a chain of kernels
 * and accesses costs the calling thread no driver call beyond its launches, and the waiter one record and one wait per
 * wake-up rather than one wait per step. Each stream's events are waited on in the order they were recorded, by a
 * thread of a shared pool that serves the stream while it has work pending ({@code cuEventSynchronize} on
 * blocking-sync events: the thread sleeps, it does not spin), so work that never ends on one stream holds up no other
 * stream's futures. A future completes on a separate callback thread, so that whatever runs on completion (the pool
 * giving a block back, user continuations that block) never holds up the next event; the futures the device finished
 * together complete there in order, and an action that waits through the library ({@link CompletionThreads#beforeWaiting}),
 * or blocks a while on something of its own, hands the later ones on to another callback thread. A future therefore
 * never completes before the device is done.
 */
final class DeviceCompletions implements AutoCloseable {

    private static final System.Logger LOG = System.getLogger(DeviceCompletions.class.getName());

    /** Work to report: behind its own recorded {@code event}, or, where that is null, a position a marker will cover. */
    private record Pending(@Nullable CUevent event, StreamWork<?> work, Runnable onDone) {}

    /** A stream's events and positions not yet reported, and whether a waiter thread is serving them. */
    private static final class StreamEvents {
        final ArrayDeque<Pending> pending = new ArrayDeque<>();
        /** What the waiter thread took off {@link #pending} and waits for on the device; empty once the device is past it. */
        List<Pending> taken = List.of();
        boolean served;
    }

    /**
     * A future for work queued on a stream, with the event recorded behind it or as a position on it, so that another
     * stream can be ordered after the work on the device ({@link #orderStream}). The event goes back to the pool once
     * the device is past it, under this future's monitor; the future completes a little later, on the callback thread.
     */
    static final class StreamWork<T> extends CompletableFuture<T> {
        private final CUstream stream;
        /** The event recorded behind the work; null for a position, which has none of its own. */
        private final @Nullable CUevent event;
        private final DeviceCompletions owner;
        private boolean passed;

        StreamWork(CUstream stream, @Nullable CUevent event, DeviceCompletions owner) {
            this.stream = stream;
            this.event = event;
            this.owner = owner;
        }

        /**
         * Makes what {@code next} runs from now on wait for this work, on the device: nothing to do on the same stream
         * (a stream runs in order) or once the work is done; else {@code cuStreamWaitEvent}, for a position on an
         * event recorded behind it now (the stream is one of the backend's, alive while the caller holds the
         * lifecycle's read lock; it may have queued more since, which the wait then covers too).
         */
        boolean orderStream(CUstream next, CudaContext context) {
            if (next == stream || isDone()) {
                return true;
            }
            if (event == null) {
                try {
                    owner.makeWait(next, stream);
                    return true;
                } catch (RuntimeException e) {
                    return false; // the caller waits for the work on the host instead, which reports the failure
                }
            }
            synchronized (this) {
                if (passed) {
                    return true;
                }
                context.makeCurrent(); // after the wait for this monitor
                return cuStreamWaitEvent(next, event, 0) == CudaResults.SUCCESS;
            }
        }

        /** Whether this work was queued on {@code candidate} (null: a thread whose stream is not made yet). */
        boolean isOn(@Nullable CUstream candidate) {
            return stream == candidate;
        }

        boolean sameStream(StreamWork<?> other) {
            return stream == other.stream;
        }

        /** The device is past the event: it may be recorded for other work from now on. */
        private synchronized void passed() {
            passed = true;
        }
    }

    /** How long a wait on the calling thread polls before it gives up: {@code compute.memory.device-wait-timeout}. */
    private final Duration deviceWait;
    private final CudaContext context;
    private final ConcurrentLinkedQueue<CUevent> idleEvents = new ConcurrentLinkedQueue<>();
    /** Streams with events pending, under this object's monitor. */
    private final Map<CUstream, StreamEvents> streams = new IdentityHashMap<>();
    private final ExecutorService waiters;
    private final CompletionThreads callbacks;
    private volatile boolean closed;
    /** Set by a close that ran out of time on an action still running on a completion thread: {@link #closeOutlivedByAnAction}. */
    private volatile boolean closeOutlivedByAnAction;

    DeviceCompletions(CudaContext context) {
        this(context, BackendSettings.DEFAULT_DEVICE_WAIT_TIMEOUT);
    }

    DeviceCompletions(CudaContext context, Duration deviceWait) {
        this.context = context;
        this.deviceWait = deviceWait;
        this.callbacks = new CompletionThreads(Executors.newCachedThreadPool(LibraryThreads.daemons("compute-cuda-" + context.ordinal + "-callbacks-", true)));
        this.waiters = Executors.newCachedThreadPool(LibraryThreads.daemons("compute-cuda-" + context.ordinal + "-events-", true));
    }

    private CUevent acquireEvent() {
        CUevent event = idleEvents.poll();
        if (event != null) {
            return event;
        }
        event = new CUevent();
        CudaResults.check(cuEventCreate(event, CUevent_flags.CU_EVENT_BLOCKING_SYNC | CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate");
        return event;
    }

    private void releaseEvent(CUevent event) {
        idleEvents.add(event);
    }

    /**
     * A future completing with {@code value.get()} once the work queued on {@code stream} so far has finished, from an
     * event recorded behind it now: for any stream, one of one's own included, which may be gone by the time the
     * waiter gets to it.
     */
    <T> CompletableFuture<T> record(CUstream stream, Supplier<T> value) {
        CUevent event = acquireEvent();
        StreamWork<T> future = new StreamWork<>(stream, event, this);
        int result = cuEventRecord(event, stream);
        if (result != CudaResults.SUCCESS) {
            releaseEvent(event);
            throw CudaResults.failure(result, "cuEventRecord");
        }
        whenDone(event, future, value);
        return future;
    }

    /** A future for the work queued on {@code stream} so far. */
    CompletableFuture<Void> record(CUstream stream) {
        return record(stream, () -> null);
    }

    /**
     * As {@link #record}, with no driver call: the waiter thread records a marker behind this position and every other
     * made before it on the stream. Only for the backend's own streams, which live until the close has waited for
     * every position ({@link #close(Duration)}).
     */
    <T> CompletableFuture<T> position(CUstream stream, Supplier<T> value) {
        StreamWork<T> future = new StreamWork<>(stream, null, this);
        whenDone(null, future, value);
        return future;
    }

    /** A position for the work queued on {@code stream} so far: see {@link #position(CUstream, Supplier)}. */
    CompletableFuture<Void> position(CUstream stream) {
        return position(stream, () -> null);
    }

    /** Makes {@code waiting} wait, on the device, for the work queued on {@code on} so far. */
    void makeWait(CUstream waiting, CUstream on) {
        CUevent event = acquireEvent();
        try {
            CudaResults.check(cuEventRecord(event, on), "cuEventRecord");
            CudaResults.check(cuStreamWaitEvent(waiting, event, 0), "cuStreamWaitEvent");
        } finally {
            releaseEvent(event); // a stream waits for the event as it was recorded when it was asked to: reusable at once
        }
    }

    /** The deadline ({@link System#nanoTime}) of a wait on the calling thread that begins now. */
    long deadline() {
        return deadline(deviceWait);
    }

    private static long deadline(Duration wait) {
        long nanos;
        try {
            nanos = Math.min(Math.max(0, wait.toNanos()), Long.MAX_VALUE >> 2);
        } catch (ArithmeticException beyondLong) {
            nanos = Long.MAX_VALUE >> 2;
        }
        return System.nanoTime() + nanos;
    }

    /**
     * Waits, on the calling thread and at most until {@link #deadline()}, for the work queued on {@code stream} so far;
     * a {@link DeviceTimeoutException} past it. Called before a synchronous call queues anything, so that a timeout
     * leaves nothing queued that could still write memory after the call has failed.
     */
    void await(CUstream stream) {
        await(stream, deadline());
    }

    void await(CUstream stream, long deadline) {
        context.makeCurrent(); // the caller may have waited since it entered (CudaContext#makeCurrent)
        if (cuStreamQuery(stream) == CudaResults.SUCCESS) {
            return; // idle: nothing queued ahead (a failure or work under way takes the event's path, which reports it)
        }
        CUevent event = acquireEvent();
        try {
            CudaResults.check(cuEventRecord(event, stream), "cuEventRecord");
            if (!awaitEvent(event, deadline, "cuEventQuery")) {
                throw timeout("device work queued ahead on this thread's stream");
            }
        } finally {
            releaseEvent(event); // nothing else waits on this record: a later cuEventRecord may move the event at once
            context.makeCurrent(); // for the caller's next call, after this wait
        }
    }

    /** As {@link #await}, for cleanup after a failure: a second failure must not hide the first. True when the stream got there. */
    boolean awaitQuietly(CUstream stream) {
        try {
            await(stream);
            return true;
        } catch (RuntimeException ignored) {
            // a failed context reports the first error again; the caller is already throwing it
            return false;
        }
    }

    /** A wait that ran past {@code compute.memory.device-wait-timeout}. */
    DeviceTimeoutException timeout(String what) {
        return new DeviceTimeoutException(what + " did not finish within " + deviceWait.toMillis() + " ms"
                + " (compute.memory.device-wait-timeout): a kernel that runs longer or never ends, or a stream waiting on an"
                + " event that is never recorded; what the device may still use is kept, not reused", deviceWait);
    }

    /**
     * Polls {@code event} ({@code cuEventQuery}) until it has completed, true, or {@code deadline} has passed, false:
     * never {@code cuEventSynchronize}, which cannot be bounded ({@link DeviceWaits}).
     */
    static boolean awaitEvent(CUevent event, long deadline, String call) {
        return DeviceWaits.until(() -> {
            int result = cuEventQuery(event);
            if (result != CudaResults.SUCCESS && result != CudaResults.NOT_READY) {
                throw CudaResults.failure(result, call);
            }
            return result == CudaResults.SUCCESS;
        }, deadline);
    }

    /**
     * Completes {@code work} with {@code value.get()} once {@code event} (or, where null, a marker behind it) has
     * completed, or with the failure when waiting fails.
     */
    private <T> void whenDone(@Nullable CUevent event, StreamWork<T> work, Supplier<T> value) {
        Runnable onDone = () -> {
            try {
                work.complete(value.get());
            } catch (Throwable e) {
                work.completeExceptionally(e); // reported where it belongs; the rest of the waiter's batch still completes
            }
        };
        StreamEvents events;
        synchronized (this) {
            if (closed) {
                if (event != null) {
                    releaseEvent(event);
                }
                throw new IllegalStateException("this CUDA backend is closed");
            }
            events = streams.computeIfAbsent(work.stream, stream -> new StreamEvents());
            events.pending.add(new Pending(event, work, onDone));
            if (events.served) {
                return;
            }
            events.served = true;
        }
        waiters.execute(() -> serve(work.stream, events));
    }

    /**
     * Reports a stream's work in the order it was added, until none is pending: an event recorded by the caller on its
     * own; a position with everything pending beside it, behind one marker recorded here, after they were added (so
     * after their work was queued, and after the events among them were recorded), which therefore covers them all.
     */
    private void serve(CUstream stream, StreamEvents events) {
        boolean current = false;
        while (true) {
            List<Pending> batch;
            synchronized (this) {
                Pending head = events.pending.peek();
                if (head == null) {
                    events.taken = List.of();
                    events.served = false;
                    streams.remove(stream);
                    notifyAll();
                    return;
                }
                if (head.event() != null) {
                    batch = List.of(events.pending.poll());
                } else {
                    batch = new ArrayList<>(events.pending);
                    events.pending.clear();
                }
                events.taken = batch;
            }
            RuntimeException failure = null;
            CUevent marker = null;
            try {
                if (!current) {
                    context.makeCurrent();
                    current = true;
                }
                CUevent awaited = batch.getFirst().event();
                if (awaited == null) {
                    marker = acquireEvent();
                    CudaResults.check(cuEventRecord(marker, stream), "cuEventRecord(marker)");
                    awaited = marker;
                }
                CudaResults.check(cuEventSynchronize(awaited), "cuEventSynchronize");
            } catch (RuntimeException e) {
                failure = e;
            }
            for (Pending done : batch) {
                if (done.event() != null) {
                    done.work().passed(); // no stream is made to wait on the event after this, so it can be reused
                    releaseEvent(done.event());
                }
            }
            if (marker != null) {
                releaseEvent(marker);
            }
            synchronized (this) {
                // the device is past the batch: a close made by one of its futures' actions must not wait for the rest
                events.taken = List.of();
            }
            RuntimeException reported = failure;
            List<Runnable> completions = new ArrayList<>(batch.size());
            for (Pending done : batch) {
                completions.add(reported == null ? done.onDone() : () -> done.work().completeExceptionally(reported));
            }
            // in order, on one callback thread; an action that waits through the library, or blocks a while, hands the later ones on
            callbacks.executeInOrder(completions);
        }
    }

    /**
     * The work recorded so far on any stream, the users' own included ({@link CudaDeviceHandle#recordWork}), that the
     * device may not be past yet: each a future that completes once it is (work the device is past, whose futures
     * the callbacks have still to complete, is not among them: the action of one of them may be the caller).
     */
    synchronized List<CompletableFuture<?>> unreported() {
        List<CompletableFuture<?>> work = new ArrayList<>();
        for (StreamEvents events : streams.values()) {
            events.taken.forEach(taken -> work.add(taken.work()));
            events.pending.forEach(pending -> work.add(pending.work()));
        }
        return work;
    }

    /**
     * Whether a {@link #close(Duration)} returned false because an application's action on a completion thread had not
     * ended, the device past every event: close has said so, and the device is not the one to blame.
     */
    boolean closeOutlivedByAnAction() {
        return closeOutlivedByAnAction;
    }

    /** As {@link #close(Duration)}, waiting as long as close() of the backend does. */
    @Override
    public void close() {
        close(CudaBackend.DEVICE_WAIT_AT_CLOSE);
    }

    /**
     * Waits, at most {@code bound}, for every recorded event to be reported and for the callbacks under way to end,
     * then frees the events and stops the threads; true when it did. When the device did not finish in time the waiter
     * thread is left in its {@code cuEventSynchronize} (it cannot be interrupted) and the events stay allocated: false;
     * false too, saying so, when an application's dependent action still runs on a callback then.
     */
    boolean close(Duration bound) {
        long deadline = deadline(bound);
        synchronized (this) {
            if (closed && streams.isEmpty() && waiters.isShutdown()) {
                return true;
            }
            closed = true;
            boolean interrupted = false; // waited through (a close on an interrupted thread must not keep the events), put back after
            for (long left; !streams.isEmpty() && (left = deadline - System.nanoTime()) > 0; ) {
                try {
                    TimeUnit.NANOSECONDS.timedWait(this, left);
                } catch (InterruptedException e) {
                    interrupted = true;
                }
            }
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
            if (!streams.isEmpty()) {
                return false; // a waiter is still in its cuEventSynchronize (it cannot be interrupted): events kept
            }
        }
        waiters.shutdown();
        // closed by a future's dependent action, on a callback, it waits for the other callbacks, not for itself
        if (!callbacks.shutdownAndAwait(deadline)) {
            LOG.log(System.Logger.Level.WARNING, "CUDA device " + context.ordinal + ": an action dependent on a device future"
                    + " (thenApply, thenRun, whenComplete and the like) was still running on a completion thread when the"
                    + " backend's close ran out of time; the backend keeps its events, streams and context rather than release"
                    + " them under it. An action that blocks should run on an executor of its own (thenRunAsync)");
            closeOutlivedByAnAction = true;
            return false;
        }
        for (CUevent event; (event = idleEvents.poll()) != null; ) {
            cuEventDestroy(event);
        }
        return true;
    }
}
