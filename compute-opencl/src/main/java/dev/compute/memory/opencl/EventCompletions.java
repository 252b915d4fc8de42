package dev.compute.memory.opencl;

import static org.jocl.CL.CL_EVENT_COMMAND_EXECUTION_STATUS;
import static org.jocl.CL.CL_SUCCESS;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import org.jocl.CL;
import org.jocl.Pointer;
import org.jocl.Sizeof;
import org.jocl.cl_command_queue;
import org.jocl.cl_event;
import org.jspecify.annotations.Nullable;

/**
 * Turns OpenCL events into futures that complete only once the command is {@code CL_COMPLETE} (the pool keeps
 * a closed buffer's memory until then, so completing early would hand out memory a command still uses).
 *
 * <p>One waiter thread takes events in the order they were handed in and blocks in {@code clWaitForEvents}. For the
 * backend's one in-order queue, commands finish in that order: it takes every event handed in so far and waits for
 * the last, which means the others have ended too (one wake-up for a chain of commands, not one each);
 * for work recorded from users' own queues (a second instance) a future may complete later than its command,
 * never earlier. Unlike {@code clSetEventCallback} it needs no native thread attached to the JVM and behaves the
 * same on every driver. Futures are completed on virtual threads, so a caller's dependent action that waits for
 * a later command cannot stall the waiter behind it; {@link #close()} waits for those too, so the pool's deferred
 * frees have run before the backend releases its context.
 */
final class EventCompletions implements AutoCloseable {

    private static final System.Logger LOG = System.getLogger(EventCompletions.class.getName());

    private record Pending(@Nullable cl_event event, EventWork done, String what) {}

    private static final Pending STOP = new Pending(null, new EventWork(null, true), "stop");
    private static final Pending WAKE = new Pending(null, new EventWork(null, true), "wake");

    /**
     * A future for a command with the event that marks it, so that the backend's queue can be ordered after the command
     * on the device ({@link #orderQueue}). The event is released once the command has ended, under this future's
     * monitor; {@code null} then (and for a barrier).
     */
    static final class EventWork extends CompletableFuture<Void> {
        private @Nullable cl_event event;
        private final boolean onBackendQueue;

        EventWork(@Nullable cl_event event, boolean onBackendQueue) {
            this.event = event;
            this.onBackendQueue = onBackendQueue;
        }

        /**
         * Makes what {@code queue} (the backend's in-order queue) runs next wait for this command, on the device: nothing
         * to do for a command of that queue or one that has ended; else a barrier with the command's event in its wait
         * list. False where the device cannot (no OpenCL 1.2 barrier): the caller waits on the host.
         */
        boolean orderQueue(cl_command_queue queue) {
            if (onBackendQueue || isDone()) {
                return true;
            }
            synchronized (this) {
                if (event == null) {
                    return true;
                }
                try {
                    return CL.clEnqueueBarrierWithWaitList(queue, 1, new cl_event[] {event}, null) == CL_SUCCESS;
                } catch (RuntimeException | LinkageError noBarrier) {
                    return false;
                }
            }
        }

        boolean onBackendQueue() {
            return onBackendQueue;
        }

        private synchronized void releaseEvent() {
            if (event != null) {
                CL.clReleaseEvent(event);
                event = null;
            }
        }
    }

    private final boolean onBackendQueue;
    /** What the waiter does, after waiting for what it took, when it was asked to wake ({@link #wake}). */
    private volatile Runnable onWake = () -> { };

    private final BlockingQueue<Pending> pending = new LinkedBlockingQueue<>();
    private final Thread waiter;
    private final ExecutorService completer = Executors.newVirtualThreadPerTaskExecutor();

    /** {@code onBackendQueue}: the events handed in mark commands of the backend's own in-order queue. */
    EventCompletions(String deviceName, boolean onBackendQueue) {
        this.onBackendQueue = onBackendQueue;
        waiter = Thread.ofPlatform().daemon().name("opencl-events " + deviceName).start(this::waitInTurn);
    }

    /** A future for {@code event}'s command; takes over the event and releases it once the command ends. */
    EventWork completion(cl_event event, String what) {
        EventWork done = new EventWork(event, onBackendQueue);
        pending.add(new Pending(event, done, what));
        return done;
    }

    /** Asks the waiter to run {@code action} once it has waited for every command handed in so far. */
    void onWake(Runnable action) {
        onWake = action;
    }

    /** Wakes the waiter (cheap when it is busy): it runs the {@link #onWake} action after the commands it holds. */
    void wake() {
        pending.add(WAKE);
    }

    /** A future that completes once every command handed in before it has ended. */
    CompletableFuture<Void> barrier() {
        EventWork done = new EventWork(null, onBackendQueue);
        pending.add(new Pending(null, done, "barrier"));
        return done;
    }

    /** Every future the waiter has handed to the completer so far, as one; the waiter's own. */
    private CompletableFuture<?> handedOut = CompletableFuture.completedFuture(null);

    private void waitInTurn() {
        List<Pending> batch = new ArrayList<>();
        while (true) {
            try {
                batch.add(pending.take());
            } catch (InterruptedException e) {
                // only close() stops this thread, after every pending command has finished
                continue;
            }
            pending.drainTo(batch);
            int stop = batch.indexOf(STOP);
            List<Pending> commands = stop < 0 ? batch : batch.subList(0, stop);
            boolean woken = commands.removeIf(next -> next == WAKE);
            if (onBackendQueue) {
                awaitLast(commands); // an in-order queue: once the last has ended, every command before it has too
            }
            for (Pending next : commands) {
                if (next.event() == null) { // a barrier: done once every future handed out before it is, whatever the completer's order
                    CompletableFuture.allOf(handedOut).handle((ignored, failed) -> next.done().complete(null));
                    handedOut = next.done();
                    continue;
                }
                RuntimeException failure = await(next);
                completer.execute(() -> {
                    if (failure == null) {
                        next.done().complete(null);
                    } else {
                        next.done().completeExceptionally(failure);
                    }
                });
                handedOut = CompletableFuture.allOf(handedOut, next.done());
            }
            if (woken) {
                try {
                    onWake.run();
                } catch (RuntimeException e) {
                    LOG.log(System.Logger.Level.WARNING, "marking the queue's positions failed", e);
                }
            }
            if (stop >= 0) {
                return;
            }
            batch.clear();
        }
    }

    /** Waits for the last command of {@code commands} that has an event, so that the rest need no wait of their own. */
    private static void awaitLast(List<Pending> commands) {
        for (int i = commands.size() - 1; i >= 0; i--) {
            cl_event event = commands.get(i).event();
            if (event != null) {
                CL.clWaitForEvents(1, new cl_event[] {event}); // its status, and any failure, is read in await
                return;
            }
        }
    }

    private static @Nullable RuntimeException await(Pending next) {
        cl_event event = next.event();
        if (event == null) {
            return null; // a barrier: reaching it is all it waits for
        }
        try {
            int waited = CL.clWaitForEvents(1, new cl_event[] {event});
            int[] status = new int[1];
            int asked = CL.clGetEventInfo(event, CL_EVENT_COMMAND_EXECUTION_STATUS, Sizeof.cl_int, Pointer.to(status), null);
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
     * Stops the waiter once every command handed to it has completed (the caller has finished the queue) and
     * waits until every future has been completed and its dependent actions have run.
     */
    @Override
    public void close() {
        pending.add(STOP);
        boolean interrupted = false;
        while (waiter.isAlive()) {
            try {
                waiter.join();
            } catch (InterruptedException e) {
                interrupted = true;
            }
        }
        completer.close();
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
    }
}
