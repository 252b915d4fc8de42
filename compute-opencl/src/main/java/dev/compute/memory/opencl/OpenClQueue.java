package dev.compute.memory.opencl;

import static org.jocl.CL.CL_EVENT_COMMAND_QUEUE;
import static org.jocl.CL.CL_EVENT_CONTEXT;
import static org.jocl.CL.CL_MAP_READ;

import dev.compute.memory.DeviceTimeoutException;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.Lock;
import java.util.concurrent.locks.ReadWriteLock;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;
import org.jocl.CL;
import org.jocl.Pointer;
import org.jocl.Sizeof;
import org.jocl.cl_command_queue;
import org.jocl.cl_context;
import org.jocl.cl_context_properties;
import org.jocl.cl_device_id;
import org.jocl.cl_event;
import org.jocl.cl_mem;
import org.jspecify.annotations.Nullable;

/**
 * The backend's context and its one in-order command queue, from their creation to their release, and what is known
 * of the work on them: futures for commands ({@link EventCompletions}), positions known done by markers
 * ({@link QueuePositions}), work recorded from queues of the user's own (waited for apart from this queue's, so that
 * slow foreign work never holds up its completions), and the ordering of other work after all of it. Every command
 * of the backend goes through this one queue, so its work completes in the order it was queued, except the blocking
 * transfers: each first waits, bounded, for the work queued here before it ({@link #awaitQueuedWork}), then runs on a
 * second in-order queue of the backend's own ({@link #transferQueue}), where nothing but such transfers is ever queued.
 * On this one, work another thread queued meanwhile (a kernel that does not end, a command behind a user event never
 * set) would hold up the transfer's call without a bound.
 *
 * <p>Closing refuses new work, waits, bounded, for the calls under way, the queue and the recorded work, then releases queue and context;
 * the lifecycle lock keeps a late free from using them once released.
 */
final class OpenClQueue {

    /** The backend's logger: a close that keeps the queue is the backend's to report. */
    private static final System.Logger LOG = System.getLogger(OpenClBackend.class.getName());

    private final String describe;
    private final Duration deviceWait;
    /** Commands this queue has been given so far, counted once each is in it (a blocking command's own excepted). */
    private final AtomicLong queuedCount = new AtomicLong();
    /**
     * A count of {@link #queuedCount} up to which every command has ended: as a marker read it before it found the
     * commands ahead of it ended, or as a position that ended well was counted.
     */
    private final AtomicLong idleUpTo = new AtomicLong();
    /** Device handles open now: their holders may queue anything on this queue meanwhile. */
    private final AtomicInteger openHandles = new AtomicInteger();
    /** Set once the queue was handed to the application as it is ({@link OpenClNativeDevice#queue()}). */
    private volatile boolean handedOut;
    private final cl_context context;
    private final cl_command_queue queue;
    /** The blocking transfers' own queue: only commands that the thread queuing them waits for, which all end. */
    private final cl_command_queue transfers;
    /** Markers: {@code clEnqueueMarkerWithWaitList} from OpenCL 1.2, the deprecated {@code clEnqueueMarker} before. */
    private final boolean markersTakeWaitLists;
    private final EventCompletions completions;
    /** Work that device handles recorded from queues of the user's own, waited for apart from this queue's. */
    private final EventCompletions recordedWork;
    /** Positions on {@link #queue} for kernels and accesses, known done by markers the waiter queues. */
    private final QueuePositions positions;
    /** Guards the queue and context: {@link #closed} and {@link #released} are set under this lock. */
    private final Object lifecycle = new Object();
    /** Set, under {@link #lifecycle}, when close() begins: new work is refused. */
    private volatile boolean closed;
    private boolean released;
    /**
     * Held, shared, by each call that uses the queues for a while ({@link #asCall}: a blocking copy runs chunk after
     * chunk on {@link #transfers}, which the idle marker does not cover); close takes it whole, bounded, before it
     * releases what they use.
     */
    private final ReadWriteLock calls = new ReentrantReadWriteLock();
    /**
     * Test-only: a code every marker's enqueue returns instead of queuing it, where not {@code CL_SUCCESS} (the failure
     * a device out of resources gives).
     */
    volatile int failMarkersWith = CL.CL_SUCCESS;
    /** Completes once every {@code clFinish} run after a failed marker ({@link #finishThen}) has returned. */
    private CompletableFuture<Void> finishes = CompletableFuture.completedFuture(null);
    /** Settles waiting for the finisher's next {@code clFinish} ({@link #finishThen}); guards {@link #finisherRunning}. */
    private final List<AwaitingFinish> awaitingFinish = new ArrayList<>();
    private boolean finisherRunning;
    /** Whether an interrupt came before or during close's waits (which went on): put back once close is done. */
    private boolean interruptedWhileClosing;
    /** Completes when close() has finished the queue and every recorded work. */
    private final CompletableFuture<Void> drained = new CompletableFuture<>();

    /**
     * Creates a context on {@code device} and an in-order queue in it; {@code deviceWait} bounds the backend's blocking
     * commands' wait for the work queued before them ({@link #awaitQueuedWork}).
     */
    OpenClQueue(OpenClDevice device, boolean markersTakeWaitLists, Duration deviceWait) {
        this.describe = device.describe();
        this.deviceWait = deviceWait;
        this.markersTakeWaitLists = markersTakeWaitLists;
        cl_device_id id = device.deviceId();
        cl_context_properties properties = new cl_context_properties();
        properties.addProperty(CL.CL_CONTEXT_PLATFORM, device.platformId());
        int[] error = new int[1];
        this.context = JoclCalls.clCreateContext(properties, 1, new cl_device_id[] {id}, null, null, error);
        OpenClCalls.check(error[0], "clCreateContext on " + describe);
        cl_command_queue created = createQueue(id, error);
        if (error[0] != CL.CL_SUCCESS) {
            JoclCalls.clReleaseContext(context);
            OpenClCalls.check(error[0], "clCreateCommandQueue on " + describe);
        }
        cl_command_queue transfersCreated = createQueue(id, error);
        if (error[0] != CL.CL_SUCCESS) {
            JoclCalls.clReleaseCommandQueue(created);
            JoclCalls.clReleaseContext(context);
            OpenClCalls.check(error[0], "clCreateCommandQueue (blocking transfers) on " + describe);
        }
        this.queue = created;
        this.transfers = transfersCreated;
        this.completions = new EventCompletions(device.deviceName(), true);
        this.recordedWork = new EventCompletions(device.deviceName() + " (recorded work)", false);
        this.positions = new QueuePositions(new QueuePositions.Markers() {
            @Override
            public boolean mark(List<QueuePositions.Position> covered) {
                return markCovering(covered, false) != QueuePositions.Marked.NOT_QUEUED;
            }

            @Override
            public QueuePositions.Marked markAndAwaitHere(List<QueuePositions.Position> covered) {
                return markCovering(covered, true);
            }
        }, completions::wake, completions::wakeSoon, count -> idleUpTo.accumulateAndGet(count, Math::max));
        completions.onWake(positions::markUncovered);
    }

    @SuppressWarnings("deprecation") // clCreateCommandQueueWithProperties is absent on OpenCL 1.x devices
    private cl_command_queue createQueue(cl_device_id device, int[] error) {
        return JoclCalls.clCreateCommandQueue(context, device, 0, error);
    }

    cl_context context() {
        return context;
    }

    cl_command_queue commandQueue() {
        return queue;
    }

    /**
     * The queue for blocking transfers, queued once {@link #awaitQueuedWork} returned and waited for by the thread that
     * queued them: nothing else is ever queued on it, so such a call ends with its own copy.
     */
    cl_command_queue transferQueue() {
        return transfers;
    }

    void checkOpen() {
        if (closed) {
            throw new IllegalStateException("this OpenCL backend (" + describe + ") is closed");
        }
    }

    /** Flushes the queue so the command starts, and returns a future for its event. */
    EventCompletions.EventWork track(cl_event event, String what) {
        OpenClCalls.check(JoclCalls.clFlush(queue), "clFlush");
        queuedCount.incrementAndGet();
        return completions.completion(event, what);
    }

    /**
     * {@link #track}, with a value the host makes from the command's results once it has ended (a sum's total from its
     * partial sums). Later work on the queue is ordered after it on the device as after the command itself: the host's
     * part touches no buffer's memory, so an op or a launch after a sum need not wait for it on the host.
     */
    <T> CompletableFuture<T> track(cl_event event, String what, Supplier<T> value) {
        return new ValueOfCommand<>(track(event, what), value);
    }

    /** What {@link #track(cl_event, String, Supplier)} returns: on the queue, the command it is made from. */
    private static final class ValueOfCommand<T> extends CompletableFuture<T> {
        private final EventCompletions.EventWork command;

        ValueOfCommand(EventCompletions.EventWork command, Supplier<T> value) {
            this.command = command;
            command.whenComplete((ignored, failure) -> {
                if (failure != null) {
                    completeExceptionally(failure);
                    return;
                }
                try {
                    complete(value.get());
                } catch (RuntimeException | Error e) {
                    completeExceptionally(e);
                }
            });
        }
    }

    /** A marker on the queue after everything queued so far, flushed, for a wait list of the caller's; it releases it. */
    cl_event markerEvent() {
        synchronized (lifecycle) {
            checkOpen();
            cl_event marker = new cl_event();
            OpenClCalls.check(enqueueMarker(marker), "clEnqueueMarker");
            OpenClCalls.check(JoclCalls.clFlush(queue), "clFlush");
            return marker;
        }
    }

    /**
     * A future for everything queued so far (flushed, so it starts), with no command or event of its own: it completes
     * once a marker queued after it has ended ({@link QueuePositions}). For kernels and device accesses, whose
     * failures their enqueue call reports. The flush is a call under way (the close releases the queue only once calls
     * have ended), not under the lifecycle lock: the waiter queues its markers under that lock, and a chain's every
     * step passes here.
     */
    CompletableFuture<Void> position() {
        if (closed) { // looked at first: a close under way may be waiting for the calls' lock, which this would queue behind
            return drained;
        }
        Lock shared = calls.readLock();
        shared.lock();
        try {
            if (closed) {
                return drained;
            }
            OpenClCalls.check(JoclCalls.clFlush(queue), "clFlush");
        } finally {
            shared.unlock();
        }
        return positions.next(queuedCount.incrementAndGet());
    }

    /** As {@link #position()}, for a command whose event the caller made: released here. */
    CompletableFuture<Void> position(cl_event queued) {
        JoclCalls.clReleaseEvent(queued);
        return position();
    }

    /**
     * Waits on the calling thread, at most the device wait, for every command queued so far on this queue, so that a
     * blocking command queued next does not wait for them without a bound (a kernel that never ends, a command behind a
     * user event never set): a marker, its status polled. Throws {@link DeviceTimeoutException} when they have not ended
     * by then. A failed command has ended too.
     */
    void awaitQueuedWork(String before) {
        if (!mayHoldWork()) {
            return;
        }
        if (!queuedWorkEnds(before)) {
            throw new DeviceTimeoutException("device work queued earlier on the OpenCL queue of " + describe + " had not ended "
                    + deviceWait.toMillis() + " ms later (compute.memory.device-wait-timeout), so " + before + " was not queued behind it:"
                    + " a kernel that does not end, or a command waiting for an event nobody sets", deviceWait);
        }
    }

    /**
     * Whether anything may still run on the queue: false only when no command was counted since the queue was last
     * known idle ({@link #idleUpTo}), no device handle is open (its holder queues what it likes) and the queue was never handed out as it is
     * ({@link #handOut}). Commands are counted once they are in the queue, so what a marker found done stays done.
     */
    private boolean mayHoldWork() {
        return handedOut || openHandles.get() > 0 || queuedCount.get() != idleUpTo.get();
    }

    /** A device handle opens: its holder may queue work of its own until it ends ({@link #handleEnded}). */
    void handleOpened() {
        openHandles.incrementAndGet();
    }

    void handleEnded() {
        openHandles.decrementAndGet();
    }

    /** The queue itself, for the application's own code: anything may be queued on it from now on. */
    cl_command_queue handOut() {
        handedOut = true;
        return queue;
    }

    /** How long the backend's blocking commands wait for the work queued before them. */
    Duration deviceWait() {
        return deviceWait;
    }

    /** As {@link #awaitQueuedWork}: false where the work queued so far has not ended within the device wait. */
    boolean queuedWorkEnds(String before) {
        long seen = queuedCount.get(); // read before the marker: what it counts is in the queue ahead of it
        cl_event marker = new cl_event();
        synchronized (lifecycle) {
            checkOpen();
            int code = enqueueMarker(marker);
            OpenClCalls.check(code, "clEnqueueMarker before " + before);
            OpenClCalls.check(JoclCalls.clFlush(queue), "clFlush");
        }
        try {
            if (!EventCompletions.endsWithin(marker, deviceWait)) {
                return false;
            }
            idleUpTo.accumulateAndGet(seen, Math::max);
            return true;
        } finally {
            JoclCalls.clReleaseEvent(marker); // a marker still queued runs and ends without this reference
        }
    }

    /**
     * A future for the commands queued so far: a marker, which completes after every command before it on this
     * in-order queue. On a closed backend nothing is enqueued and the future is close's, which finishes the queue.
     */
    CompletableFuture<Void> marker() {
        synchronized (lifecycle) {
            return closed ? drained : markerLocked();
        }
    }

    /**
     * Queues a marker after everything queued so far, flushed, whose end completes {@code covered} (positions): the
     * waiter completes them in its place, with no future of the marker's own in between. With {@code awaitHere} the
     * calling thread also waits for the marker itself, outside the lifecycle lock. On a closed backend nothing is
     * queued; where a marker cannot be queued they fail once the queue has finished ({@link #finishThen}).
     */
    private QueuePositions.Marked markCovering(List<? extends CompletableFuture<Void>> covered, boolean awaitHere) {
        cl_event marker = new cl_event();
        boolean waitHere;
        synchronized (lifecycle) {
            if (closed) {
                return QueuePositions.Marked.NOT_QUEUED;
            }
            int code = enqueueMarker(marker);
            if (code != CL.CL_SUCCESS) {
                // nothing else would say when the queue is done with the memory: they fail once it is, not earlier
                RuntimeException failure = OpenClCalls.failure(code, "clEnqueueMarker");
                finishThen(() -> completions.fail(covered, failure));
                return QueuePositions.Marked.LEFT_TO_WAITER;
            }
            OpenClCalls.check(JoclCalls.clFlush(queue), "clFlush");
            // this thread's reference, beside the waiter's, taken before the waiter may release its own; without it the
            // waiter alone settles the marker (a throw here would leave the queued marker to nobody)
            waitHere = awaitHere && JoclCalls.clRetainEvent(marker) == CL.CL_SUCCESS;
            completions.completion(marker, "a marker", covered);
        }
        if (!waitHere) {
            return QueuePositions.Marked.LEFT_TO_WAITER;
        }
        try {
            return EventCompletions.awaitHere(marker) ? QueuePositions.Marked.ENDED : QueuePositions.Marked.LEFT_TO_WAITER;
        } finally {
            JoclCalls.clReleaseEvent(marker);
        }
    }

    /**
     * Maps and unmaps a host-memory buffer ({@code CL_MEM_USE_HOST_PTR}) once {@code after} are complete: an
     * implementation that copied the host memory for a kernel copies the results back then (on PoCL and integrated GPUs
     * it costs nothing).
     */
    void enqueuePublishToHost(cl_mem buffer, long bytes, cl_event[] after, @Nullable cl_event unmapped) {
        int[] error = new int[1];
        ByteBuffer mapping = JoclCalls.clEnqueueMapBuffer(queue, buffer, false, CL_MAP_READ, 0, bytes, after.length, after.length == 0 ? null : after, null, error);
        OpenClCalls.check(error[0], "clEnqueueMapBuffer of " + bytes + " bytes of host memory after a kernel");
        OpenClCalls.check(JoclCalls.clEnqueueUnmapMemObject(queue, buffer, mapping, 0, null, unmapped), "clEnqueueUnmapMemObject after a kernel");
    }

    /**
     * As {@link #marker()}, after publishing a host-memory buffer's contents to host memory once {@code after} are
     * complete ({@link #enqueuePublishToHost}). A failure to publish fails the future, once the marker has completed.
     */
    CompletableFuture<Void> publishToHostThenMarker(cl_mem buffer, long bytes, cl_event[] after) {
        synchronized (lifecycle) {
            if (closed) {
                return drained;
            }
            RuntimeException unpublished = null;
            try {
                enqueuePublishToHost(buffer, bytes, after, null);
            } catch (RuntimeException e) {
                unpublished = e;
            }
            CompletableFuture<Void> marked = markerLocked();
            RuntimeException failure = unpublished;
            return failure == null ? marked : marked.thenCompose(ignored -> CompletableFuture.failedFuture(failure));
        }
    }

    @SuppressWarnings("deprecation") // clEnqueueMarker is the OpenCL 1.0 and 1.1 form
    private int enqueueMarker(cl_event marker) {
        if (failMarkersWith != CL.CL_SUCCESS) {
            return failMarkersWith;
        }
        return markersTakeWaitLists ? JoclCalls.clEnqueueMarkerWithWaitList(queue, 0, null, marker) : JoclCalls.clEnqueueMarker(queue, marker);
    }

    private CompletableFuture<Void> markerLocked() {
        cl_event marker = new cl_event();
        int code = enqueueMarker(marker);
        if (code != CL.CL_SUCCESS) {
            // nothing else would say when the queue is done with the memory: the future fails once it is, not earlier
            RuntimeException failure = OpenClCalls.failure(code, "clEnqueueMarker");
            CompletableFuture<Void> finished = new CompletableFuture<>();
            finishThen(() -> finished.completeExceptionally(failure));
            return finished;
        }
        return track(marker, "a marker");
    }

    /**
     * Runs {@code clFinish} on the queue on a thread of its own, then {@code settle}: a wait with no bound, which no
     * caller and no lock waits behind. Close waits for it, bounded, before it releases the queue; where it does not
     * return (a kernel that never ends) or fails, what {@code settle} completes stays incomplete, so its memory is kept,
     * and a warning says so. Called under the lifecycle lock, before close releases the queue. One thread per queue, however
     * many markers fail (a device failing every enqueue): settles asked for while a clFinish runs wait for the next one,
     * which covers the work queued before them.
     */
    private void finishThen(Runnable settle) {
        CompletableFuture<Void> finished = new CompletableFuture<>();
        finishes = CompletableFuture.allOf(finishes, finished);
        synchronized (awaitingFinish) {
            awaitingFinish.add(new AwaitingFinish(settle, finished));
            if (finisherRunning) {
                return;
            }
            finisherRunning = true;
        }
        Thread.ofPlatform().daemon().name("opencl-finish-" + describe).start(this::finishWhileAwaited);
        CompletableFuture.delayedExecutor(deviceWait.toMillis(), TimeUnit.MILLISECONDS).execute(() -> {
            if (!finished.isDone()) {
                LOG.log(System.Logger.Level.WARNING, "OpenCL device " + describe + ": a marker could not be queued and the queue"
                        + " had not finished " + deviceWait.toMillis() + " ms later (compute.memory.device-wait-timeout); the memory"
                        + " its work uses is kept until it does (the device may be hung)");
            }
        });
    }

    /** A settle waiting for the queue's next {@code clFinish}, and what completes once that has returned. */
    private record AwaitingFinish(Runnable settle, CompletableFuture<Void> finished) {}

    /** The finisher thread: a {@code clFinish} for each round of settles asked for, until none waits. */
    private void finishWhileAwaited() {
        while (true) {
            List<AwaitingFinish> round;
            synchronized (awaitingFinish) {
                if (awaitingFinish.isEmpty()) {
                    finisherRunning = false;
                    return;
                }
                round = List.copyOf(awaitingFinish);
                awaitingFinish.clear();
            }
            int code;
            try {
                code = JoclCalls.clFinish(queue);
            } catch (RuntimeException | Error e) {
                code = CL.CL_INVALID_COMMAND_QUEUE;
            }
            if (code != CL.CL_SUCCESS) { // nothing says the queue is done with the memory: it stays kept
                LOG.log(System.Logger.Level.WARNING, "OpenCL device " + describe + ": clFinish after a failed clEnqueueMarker"
                        + " returned " + CL.stringFor_errorCode(code) + "; the memory its work uses is kept");
            }
            for (AwaitingFinish awaiting : round) {
                try {
                    if (code == CL.CL_SUCCESS) {
                        awaiting.settle().run();
                    }
                } catch (RuntimeException | Error e) { // the round's other settles, and later rounds, still run
                    LOG.log(System.Logger.Level.WARNING, "OpenCL device " + describe + ": settling work after a failed clEnqueueMarker failed", e);
                } finally {
                    awaiting.finished().complete(null);
                }
            }
        }
    }

    /**
     * A future for work queued on a queue of the user's own in this context: retains {@code event} (released once it
     * completes) and flushes its queue, so the work starts. Waited for apart from this queue, in the order recorded: a
     * future completes no earlier than its command, perhaps later.
     */
    CompletableFuture<Void> trackRecorded(cl_event event) {
        long[] owner = new long[1];
        OpenClCalls.check(JoclCalls.clGetEventInfo(event, CL_EVENT_CONTEXT, Sizeof.cl_context, Pointer.to(owner), null), "clGetEventInfo(CL_EVENT_CONTEXT)");
        if (owner[0] != context.getNativePointer()) {
            throw new IllegalArgumentException("this event belongs to another OpenCL context; record work queued on a queue of "
                    + "this backend's context (OpenClDeviceHandle.context()), where the handle's memory lives");
        }
        cl_command_queue itsQueue = new cl_command_queue();
        OpenClCalls.check(JoclCalls.clGetEventInfo(event, CL_EVENT_COMMAND_QUEUE, Sizeof.cl_command_queue, Pointer.to(itsQueue), null),
                "clGetEventInfo(CL_EVENT_COMMAND_QUEUE)");
        if (itsQueue.getNativePointer() != 0) { // a user event has no queue
            OpenClCalls.check(JoclCalls.clFlush(itsQueue), "clFlush of the recorded work's queue");
        }
        synchronized (lifecycle) {
            checkOpen();
            OpenClCalls.check(JoclCalls.clRetainEvent(event), "clRetainEvent");
            return recordedWork.completion(event, "work recorded on an OpenCL device handle");
        }
    }

    /**
     * Waits, at most {@code timeout}, for every command queued so far (a marker, never an unbounded {@code clFinish})
     * and every recorded work; true when all of it has ended, failed commands included. Once closed: whether close
     * has finished them.
     */
    boolean awaitIdle(Duration timeout) {
        CompletableFuture<Void> idle;
        synchronized (lifecycle) {
            idle = closed ? drained : CompletableFuture.allOf(markerLocked(), recordedWork.barrier());
        }
        try {
            idle.get(Math.max(0, timeout.toNanos()), TimeUnit.NANOSECONDS);
            return true;
        } catch (ExecutionException failed) {
            return true; // a failed command has ended too: nothing runs on the memory any more
        } catch (TimeoutException e) {
            return false;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    /**
     * Orders what this queue runs next after {@code work}: nothing to do for work of this queue (copies, ops, a device
     * access's marker) or work that has ended; work recorded from a queue of the user's own gets a barrier on this
     * queue, on a user event of the backend's that stands for it ({@link EventCompletions.EventWork#orderQueue}). False for other futures, which the caller waits for on the host.
     */
    boolean orderAfter(CompletableFuture<?> work) {
        if (work.isDone() || onQueue(work)) {
            return true;
        }
        synchronized (lifecycle) {
            checkOpen();
            boolean ordered = work instanceof EventCompletions.EventWork events && events.orderQueue(queue, context);
            queuedCount.incrementAndGet(); // a barrier on work of another queue, which may never end
            return ordered;
        }
    }

    /** Work on this one in-order queue completes in the order it was queued. */
    static boolean supersedes(CompletableFuture<?> later, CompletableFuture<?> earlier) {
        return onQueue(later) && onQueue(earlier);
    }

    private static boolean onQueue(CompletableFuture<?> work) {
        return work instanceof QueuePositions.Position || work instanceof EventCompletions.EventWork events && events.onBackendQueue()
                || work instanceof ValueOfCommand<?> value && onQueue(value.command);
    }

    /** Runs {@code call} as a call under way, which close waits for; refused with an {@link IllegalStateException} once close has begun. */
    <T> T asCall(Supplier<T> call) {
        Lock shared = calls.readLock();
        shared.lock();
        try {
            checkOpen();
            return call.get();
        } finally {
            shared.unlock();
        }
    }

    /**
     * Enters a call as {@link #asCall} does, for the paths every access and op takes, with no lambda to capture their
     * arguments: the caller runs its body, then unlocks the lock returned, in a {@code finally}.
     */
    Lock enterCall() {
        Lock shared = calls.readLock();
        shared.lock();
        try {
            checkOpen();
        } catch (RuntimeException closed) {
            shared.unlock();
            throw closed;
        }
        return shared;
    }

    /** {@link #asCall} for a call that returns nothing. */
    void runAsCall(Runnable call) {
        asCall(() -> {
            call.run();
            return null;
        });
    }

    /** Runs {@code action} under the lifecycle lock unless close has begun; whether it ran. */
    boolean runWhileOpen(Runnable action) {
        synchronized (lifecycle) {
            if (closed) {
                return false;
            }
            action.run();
            return true;
        }
    }

    /** Whether close has released the queue and context. */
    boolean isReleased() {
        synchronized (lifecycle) {
            return released;
        }
    }

    /** Runs {@code action}, which uses the queue or context, under the lifecycle lock unless close has released them. */
    void runUnlessReleased(Runnable action) {
        synchronized (lifecycle) {
            if (!released) {
                action.run();
            }
        }
    }

    /** As {@link #close(Duration, BooleanSupplier, Runnable)}, keeping the queue and context while any device handle is open. */
    void close(Duration deviceWait, Runnable releaseFirst) {
        close(deviceWait, () -> true, releaseFirst);
    }

    /**
     * Refuses new work, waits for the calls under way ({@link #asCall}), every queued command, every recorded work and
     * every future's dependent actions, then runs {@code releaseFirst} (what uses the queue: kernels, programs) and releases the queue and context.
     * Closing twice is harmless. While a device handle is open and {@code memoryHeld} (the backend still holds memory it
     * may reach: the manager kept it for an access held past its close timeout), its holder may queue work on the queue and
     * context it gave: they are kept, and a warning says so. A call, work, or a dependent action that does not finish within {@code deviceWait} keeps the
     * queue, the context and the threads waiting on events, and a warning says so.
     */
    void close(Duration deviceWait, BooleanSupplier memoryHeld, Runnable releaseFirst) {
        synchronized (lifecycle) {
            if (closed) {
                return;
            }
            closed = true;
        }
        // a container's shutdown closes on threads it has interrupted: a wait that gave up at the interrupt would keep
        // the queue and context for good, so the waits go on until their bound and the interrupt is put back after
        interruptedWhileClosing = Thread.interrupted();
        try {
            finishClose(deviceWait, memoryHeld, releaseFirst);
        } finally {
            if (interruptedWhileClosing) {
                Thread.currentThread().interrupt();
            }
        }
    }

    private void finishClose(Duration deviceWait, BooleanSupplier memoryHeld, Runnable releaseFirst) {
        // one bound for the close's waits together, not each: the calls, the queue, then the completions and recorded work
        long deadline = System.nanoTime() + Math.min(Math.max(0, deviceWait.toMillis()), Long.MAX_VALUE / 4_000_000L) * 1_000_000L;
        if (!callsEnded(deadline)) {
            LOG.log(System.Logger.Level.WARNING, "OpenCL device " + describe + ": a call into the backend (a copy) was still under"
                    + " way " + deviceWait.toMillis() + " ms after close began; the backend keeps its queues and context rather than"
                    + " release them under it");
            return;
        }
        // after the calls: a handle opens inside one, so none opens from now on. A handle whose memory all went back
        // reaches nothing: the manager's close ended its access itself, freed the memory, and does not end handles then
        int handles = openHandles.get();
        if (handles > 0 && memoryHeld.getAsBoolean()) {
            LOG.log(System.Logger.Level.WARNING, "OpenCL device " + describe + ": " + handles + " device handle(s) still open at close"
                    + " (a device access held past the manager's close timeout); the backend keeps its queues and context, which their"
                    + " holders may still queue work on, rather than release them under them");
            return;
        }
        CompletableFuture<Void> idle;
        synchronized (lifecycle) { // after the calls: the marker comes after what they queued
            // and after every finish run for a failed marker, which uses the queue until it returns
            idle = CompletableFuture.allOf(markerLocked(), recordedWork.barrier(), finishes);
        }
        if (!finishedWithin(idle, deadline)) {
            LOG.log(System.Logger.Level.WARNING, "OpenCL device " + describe
                    + ": queued or recorded work did not finish" + (deviceWait.isZero() ? " before the manager's close timeout ran out"
                    : " within " + deviceWait.toMillis() + " ms of close") + "; the backend"
                    + " keeps its queue and context rather than release them under it (the device may be hung)");
            return;
        }
        try {
            JoclCalls.clFinish(queue);
            JoclCalls.clFinish(transfers); // only transfers whose calls have returned: ended already
        } finally {
            boolean settled = completions.close(left(deadline)) & recordedWork.close(left(deadline));
            if (settled) {
                synchronized (lifecycle) {
                    released = true;
                    releaseFirst.run();
                    JoclCalls.clReleaseCommandQueue(queue);
                    JoclCalls.clReleaseCommandQueue(transfers);
                    JoclCalls.clReleaseContext(context);
                }
                drained.complete(null);
            } else {
                LOG.log(System.Logger.Level.WARNING, "OpenCL device " + describe + ": an action that depends on finished work (the"
                        + " application's, on a future the backend completed) was still running " + deviceWait.toMillis() + " ms after"
                        + " the queue finished; the backend keeps its queue and context rather than release them under it");
            }
        }
    }

    private static Duration left(long deadline) {
        return Duration.ofNanos(Math.max(0, deadline - System.nanoTime()));
    }

    /** Whether the calls under way when close began ({@link #asCall}) ended by {@code deadline} ({@link System#nanoTime()}). */
    private boolean callsEnded(long deadline) {
        Lock whole = calls.writeLock();
        while (true) {
            try {
                if (!whole.tryLock(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS)) {
                    return false;
                }
                whole.unlock();
                return true;
            } catch (InterruptedException e) {
                interruptedWhileClosing = true;
            }
        }
    }

    private boolean finishedWithin(CompletableFuture<Void> work, long deadline) {
        while (true) {
            try {
                work.get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
                return true;
            } catch (ExecutionException failed) {
                return true; // a failed command has ended too
            } catch (TimeoutException e) {
                return false;
            } catch (InterruptedException e) {
                interruptedWhileClosing = true;
            }
        }
    }
}
