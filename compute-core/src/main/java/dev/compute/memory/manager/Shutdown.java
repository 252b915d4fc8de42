package dev.compute.memory.manager;

import dev.compute.memory.LiveBufferReport;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.internal.LibraryThreads;
import dev.compute.memory.internal.ManagerLog;
import dev.compute.memory.internal.UserCode;
import dev.compute.memory.spi.ComputeBackend;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;

/**
 * A manager's close, in an order that never frees memory a thread can still reach: mark closed (new calls fail),
 * fail the waiting requests, wait for calls under way (one of them may be opening a view), end every view and access
 * (this thread's and shared ones now, other threads' when they next call in or end), wait for device work, and only
 * then free the pools and close the backend. The waits are bounded by the close timeout together (the backend's close
 * gets what is left of it, {@link #BACKEND_CLOSE_FLOOR} at least); what is still held then is kept, not freed, and said
 * in the log. A second close, on another thread, returns once the first is done,
 * having ended its own views meanwhile; one on the closing thread itself (a function of a waiting request's future,
 * which fails there), or from a listener or handler (whose thread may be inside a call the first waits for), returns at
 * once, and the first goes on.
 */
public final class Shutdown {

    private static final System.Logger LOG = ManagerLog.logger();
    /** Of the close timeout (a quarter of it at most), what the waits for views, accesses and calls leave to ask the device if it is idle. */
    private static final long DEVICE_CHECK_RESERVE_NANOS = TimeUnit.MILLISECONDS.toNanos(250);
    /**
     * The least a close gives the backend's own close on an idle device, however little of the close timeout is left:
     * time to stop its threads, and for an application's action on a device future that is just ending to end, rather
     * than keep the backend's context and queues for good over it.
     */
    static final Duration BACKEND_CLOSE_FLOOR = Duration.ofSeconds(1);
    /** How many of the threads still holding views a close's warning names. */
    private static final int HOLDERS_NAMED = 10;

    /** The parts a close goes through, in its order. */
    public record Parts(CallGate gate, AllocationWaiters<?> waiters, ComputeBackend backend, BlockReturns returns, Maintenance maintenance,
                 LocationChains chains, MappedFiles mappedFiles, ManagerFigures figures) {}

    private final Parts parts;
    /** What the log calls the manager. */
    private final String name;
    private final Duration closeTimeout;
    /** Told whether the memory went back (the pools were freed) once the rest is done: the budgets close with the manager. */
    private final Consumer<Boolean> budgetsClose;
    private final CountDownLatch done = new CountDownLatch(1);
    /** The thread inside the first close while it runs: a close it makes meanwhile (a waiting request's function) cannot wait for it. */
    private volatile @Nullable Thread closing;
    /** The waits of the thread finishing the close: an interrupt they take off is set again once it is done. */
    private final WaitThroughInterrupts waits = new WaitThroughInterrupts();

    public Shutdown(Parts parts, String name, Duration closeTimeout, Consumer<Boolean> budgetsClose) {
        this.parts = parts;
        this.name = name;
        this.closeTimeout = closeTimeout;
        this.budgetsClose = budgetsClose;
    }

    public void close() {
        CallGate gate = parts.gate();
        if (!gate.close()) {
            // not inside this thread's own close, which goes on after it, nor from a listener or handler: its thread may
            // be inside a call, which a close started there (as the first may have been) waits for
            if (closing != Thread.currentThread() && !UserCode.running()) {
                awaitOtherClose();
            }
            return;
        }
        closing = Thread.currentThread();
        try {
            // the waiting requests' functions run here, on this thread, but for those of a budget's requests whose
            // attempt is under way: they run as it ends, or at the close timeout
            parts.waiters().close(closeTimeout);
            if (UserCode.running()) {
                // a listener or handler of this manager, on a thread that may be inside a call of it: the close cannot wait
                // for that call, so the call that ends last finishes it; should none end, the close timeout does
                gate.finishCloseWhenIdle(this::finish);
                LibraryThreads.daemon("compute-memory-close", this::finishAfterTimeout).start();
                return;
            }
            finish();
        } finally {
            closing = null;
        }
    }

    /** The rest of a close started inside a call, where no call ended to finish it within the close timeout. */
    private void finishAfterTimeout() {
        try {
            if (done.await(closeTimeout.toMillis(), TimeUnit.MILLISECONDS)) {
                return;
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        Runnable rest = parts.gate().takeCloseRest();
        if (rest != null) {
            rest.run();
        }
    }

    /**
     * The close waits out its bound whatever the interrupt (a container's shutdown runs on threads it has interrupted):
     * the backend's and the pool's waits give up when interrupted, and a close that gave up would keep every pool's
     * memory for good. The interrupt is taken off for the waits and put back after.
     */
    private void finish() {
        boolean interruptedBefore = Thread.interrupted();
        try {
            finishUninterrupted();
        } finally {
            if (interruptedBefore | waits.interrupted() | Thread.interrupted()) {
                Thread.currentThread().interrupt();
            }
        }
    }

    private void finishUninterrupted() {
        CallGate gate = parts.gate();
        long deadline = System.nanoTime() + closeTimeout.toNanos();
        // the holders' waits leave the device's some of the time: a close whose timeout a view on an idle thread spent
        // would otherwise ask the device in no time (a marker cannot end in none) and keep the backend as if it hung
        long holdersDeadline = deadline - Math.min(DEVICE_CHECK_RESERVE_NANOS, closeTimeout.toNanos() / 4);
        boolean deviceIdle = true;
        boolean budgetsClosed = false;
        try {
            boolean callsEnded = gate.awaitCalls(holdersDeadline);
            boolean scopesEnded = gate.scopes().closeAll(holdersDeadline);
            deviceIdle = waits.until(deadline, () -> parts.backend().awaitIdle(Duration.ofNanos(Math.max(0, deadline - System.nanoTime()))))
                    && waits.until(deadline, () -> parts.returns().awaitReleasedWork(deadline));
            parts.maintenance().stop();
            boolean memoryBack = callsEnded && scopesEnded && deviceIdle;
            if (memoryBack) {
                freeEverything(deadline);
            }
            budgetsClosed = true; // not again below, whatever the budgets' close does
            budgetsClose.accept(memoryBack);
            if (!memoryBack) {
                LOG.log(System.Logger.Level.WARNING, "UnifiedMemoryManager '" + name + "' closed, but within its close timeout ("
                        + closeTimeout.toMillis() + " ms) " + (scopesEnded ? "" : "views or accesses were still open (held by " + ThreadNames.some(gate.scopes().holders(), HOLDERS_NAMED) + "), ")
                        + (callsEnded ? "" : "calls were still under way, ") + (deviceIdle ? "" : "device work was still running, ")
                        + "so its pools keep their memory (reserved " + parts.figures().reservedBytes() + " bytes) and "
                        + parts.mappedFiles().statistics().openMappings() + " mapped file(s) stay mapped, rather than be freed under their users; "
                        + "it goes back to the system with the process. Raise compute.memory.close-timeout, or end views and "
                        + "accesses before closing.");
            }
        } catch (RuntimeException | Error e) {
            // a close that runs as a call ends must not take that call's own outcome away
            LOG.log(System.Logger.Level.ERROR, "closing the UnifiedMemoryManager failed", e);
            parts.maintenance().stop(); // a step before it threw (a backend's wait for the device); a second stop does nothing
            if (!budgetsClosed) {
                budgetsClose.accept(false); // nothing was freed
            }
        } finally {
            try {
                if (deviceIdle) { // what is left of the close timeout, not the backend's own bound (10 s on OpenCL and CUDA)
                    parts.backend().close(backendCloseBound(deadline));
                } else { // the close timeout is spent on work that did not end: the backend keeps what it may use at once
                    parts.backend().close(Duration.ZERO);
                }
            } catch (RuntimeException e) {
                LOG.log(System.Logger.Level.ERROR, "closing the compute backend failed", e);
            } finally {
                done.countDown();
            }
        }
    }

    /**
     * How long the backend's close may wait for the actions still running on its completion threads (the device is idle):
     * what is left of the close timeout, and {@link #BACKEND_CLOSE_FLOOR} at least.
     */
    private static Duration backendCloseBound(long deadline) {
        return Duration.ofNanos(Math.max(deadline - System.nanoTime(), BACKEND_CLOSE_FLOOR.toNanos()));
    }

    /** Another thread is closing: end the views it hands to this one, until it is done. */
    private void awaitOtherClose() {
        try {
            while (!done.await(1, TimeUnit.MILLISECONDS)) {
                parts.gate().scopes().endHandedOver();
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        parts.gate().scopes().endHandedOver();
    }

    private void freeEverything(long deadline) {
        List<LiveBufferReport> live = parts.figures().liveBuffers();
        parts.returns().poolsFreed();
        parts.gate().awaitCalls(deadline); // a release that saw the pools open finishes first
        if (!live.isEmpty()) {
            StringBuilder report = new StringBuilder("UnifiedMemoryManager '" + name + "' closed with " + live.size()
                    + " buffer(s) still open; their memory is freed now and the buffers can no longer be used:");
            for (LiveBufferReport buffer : live) {
                report.append("\n  ").append(buffer.location()).append(", ").append(buffer.sizeBytes()).append(" bytes")
                        .append(buffer.mappedFile() != null ? ", mapped from " + buffer.mappedFile() : "")
                        .append(buffer.allocationSite() != null ? ", allocated at:\n" + buffer.allocationSite() : "");
            }
            LOG.log(System.Logger.Level.WARNING, report.toString());
        }
        for (LocationChain chain : parts.chains().all()) {
            chain.close();
            if (chain.holding.reservedBytes() == 0) {
                chain.top.countAllFreed(); // the buffers left open went back with everything
            }
        }
        parts.mappedFiles().unmapAll();
    }
}
