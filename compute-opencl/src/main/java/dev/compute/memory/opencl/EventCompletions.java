package dev.compute.memory.opencl;

import static org.jocl.CL.CL_EVENT_COMMAND_EXECUTION_STATUS;
import static org.jocl.CL.CL_SUCCESS;

import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import org.jocl.CL;
import org.jocl.Pointer;
import org.jocl.Sizeof;
import org.jocl.cl_event;
import org.jspecify.annotations.Nullable;

/**
 * Turns OpenCL events into futures that complete only once the command is {@code CL_COMPLETE} (the pool keeps
 * a closed buffer's memory until then, so completing early would hand out memory a command still uses).
 *
 * <p>One waiter thread takes events in the order they were handed in and blocks in {@code clWaitForEvents} on
 * each. For the backend's one in-order queue, commands finish in that order and waiting in turn loses nothing;
 * for work recorded from users' own queues (a second instance) a future may complete later than its command,
 * never earlier. Unlike {@code clSetEventCallback} it needs no native thread attached to the JVM and behaves the
 * same on every driver. Futures are completed on virtual threads, so a caller's dependent action that waits for
 * a later command cannot stall the waiter behind it; {@link #close()} waits for those too, so the pool's deferred
 * frees have run before the backend releases its context.
 */
final class EventCompletions implements AutoCloseable {

    private record Pending(@Nullable cl_event event, CompletableFuture<Void> done, String what) {}

    private static final Pending STOP = new Pending(null, new CompletableFuture<>(), "stop");

    private final BlockingQueue<Pending> pending = new LinkedBlockingQueue<>();
    private final Thread waiter;
    private final ExecutorService completer = Executors.newVirtualThreadPerTaskExecutor();

    EventCompletions(String deviceName) {
        waiter = Thread.ofPlatform().daemon().name("opencl-events " + deviceName).start(this::waitInTurn);
    }

    /** A future for {@code event}'s command; takes over the event and releases it once the command ends. */
    CompletableFuture<Void> completion(cl_event event, String what) {
        CompletableFuture<Void> done = new CompletableFuture<>();
        pending.add(new Pending(event, done, what));
        return done;
    }

    /** A future that completes once every command handed in before it has ended. */
    CompletableFuture<Void> barrier() {
        CompletableFuture<Void> done = new CompletableFuture<>();
        pending.add(new Pending(null, done, "barrier"));
        return done;
    }

    private void waitInTurn() {
        while (true) {
            Pending next;
            try {
                next = pending.take();
            } catch (InterruptedException e) {
                // only close() stops this thread, after every pending command has finished
                continue;
            }
            if (next == STOP) {
                return;
            }
            RuntimeException failure = await(next);
            completer.execute(() -> {
                if (failure == null) {
                    next.done().complete(null);
                } else {
                    next.done().completeExceptionally(failure);
                }
            });
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
            CL.clReleaseEvent(event);
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
