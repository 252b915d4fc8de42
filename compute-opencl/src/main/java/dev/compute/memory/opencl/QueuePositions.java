package dev.compute.memory.opencl;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.LongConsumer;
import org.jocl.CL;
import org.jocl.cl_event;
import org.jspecify.annotations.Nullable;

/**
 * Futures for "everything queued on the backend's in-order queue so far", without a command or an event each: a
 * kernel op's or a device access's work is known done once a marker queued after it has ended, and one marker
 * serves every position made before it. So a chain of kernels and accesses costs the device one marker per
 * wake-up of the waiter thread rather than an event per step.
 *
 * <p>A kernel's position keeps its command's event: where it is the last of the positions to cover and every other
 * was made before the kernel was queued, that event's end completes them all, and no marker is queued
 * ({@link #coveringCommand}), as a chain on the raw queue waits for its last kernel's event.
 *
 * <p>The first position after a marker asks the waiter to mark soon ({@code wakeSoon}: within
 * {@link EventCompletions#WAKE_SOON_NANOS}), so that the positions of a chain of steps share a marker and the waiter
 * wakes once for them, not once per step; then it covers every position still uncovered ({@link #markForWaiter}),
 * leaving those after the last kernel's event for one more while, once.
 * What needs a position done sooner says so: a dependent action attached through the position's own methods wakes the
 * waiter at once ({@code wake}), and a caller that waits on a position itself ({@link Position#get},
 * {@link Position#join}) marks at once. A future that only combines positions (such as {@code allOf}) sees them
 * complete within that while of their commands.
 */
final class QueuePositions {

    /**
     * A position on the queue: completes once a marker queued after it has ended, or the last command of a position
     * made after it ({@link #coveringCommand}).
     */
    static final class Position extends EventCompletions.Awaited {
        private final QueuePositions owner;
        /** The queue's count of commands when it was made: once it ends well, every command counted up to there has ended. */
        private final long count;
        /**
         * The event of the command it follows, where its maker had one (a kernel): on an in-order queue its end says
         * every position counted before that command was queued is done, without a marker. Released once it completes.
         */
        private @Nullable cl_event command;
        /** The queue's count before {@link #command} was queued: positions counted up to there were made before it. */
        private final long countBefore;
        /** Set once its own command's end is what completes it: then only the commands counted before it are known ended. */
        private volatile boolean completedByItsCommand;
        /** Set, under the owner's monitor, once a marker covers it. */
        private boolean covered;
        /** Set, under the owner's monitor, once the waiter left it uncovered for a while ({@link #markForWaiter}). */
        private boolean leftOnce;

        private Position(QueuePositions owner, long count, @Nullable cl_event command, long countBefore) {
            this.owner = owner;
            this.count = count;
            this.command = command;
            this.countBefore = countBefore;
        }

        /** Ended well: says so to the queue ({@link QueuePositions#QueuePositions}'s {@code ended}) before any waiter wakes. */
        @Override
        public boolean complete(Void value) {
            // by its own command: what was counted between the command and this position is known ended only where nothing was
            owner.ended.accept(!completedByItsCommand || count == countBefore + 1 ? count : countBefore);
            releaseCommand();
            return super.complete(value);
        }

        @Override
        public boolean completeExceptionally(Throwable failure) {
            releaseCommand();
            return super.completeExceptionally(failure);
        }

        /** A reference to its command's event for the caller, who releases it; null where it has none (any more). */
        synchronized @Nullable cl_event retainCommand() {
            if (command == null || CL.clRetainEvent(command) != CL.CL_SUCCESS) {
                return null;
            }
            completedByItsCommand = true;
            return command;
        }

        private synchronized void releaseCommand() {
            if (command != null) {
                CL.clReleaseEvent(command);
                command = null;
            }
        }

        @Override
        void beforeBlocking() {
            owner.markUnlessDone(this);
        }

        @Override
        void beforeJoining() {
            owner.markAndAwaitHere(this);
        }

        /** Every dependent action attached through this future's own methods comes here first: its waiter wakes now. */
        @Override
        public <U> CompletableFuture<U> newIncompleteFuture() {
            owner.wakeUnlessDone(this);
            return new CompletableFuture<>();
        }
    }

    /** How a marker is queued after positions and waited for. */
    interface Markers {
        /**
         * Queues a marker after every position of {@code covered}, whose end completes them; false once the backend is
         * closed, when nothing was queued.
         */
        boolean mark(List<Position> covered);

        /** As {@link #mark}, then waits for the marker's end on the calling thread. */
        Marked markAndAwaitHere(List<Position> covered);
    }

    /** What became of a marker waited for on the calling thread. */
    enum Marked {
        /** It ended well: the positions it covers are done. */
        ENDED,
        /** Left to the waiter: queued and not waited for here, or it did not end well, or none could be queued (failed). */
        LEFT_TO_WAITER,
        /** Nothing was queued: the backend is closed. */
        NOT_QUEUED
    }

    private final ArrayDeque<Position> uncovered = new ArrayDeque<>();
    /** Whether the waiter has been asked to mark at once and has not started yet: one wake-up serves every position meanwhile. */
    private final AtomicBoolean wakeAsked = new AtomicBoolean();
    /** Queues markers on the backend's queue whose end completes the positions given. */
    private final Markers markers;
    private final Runnable wake;
    private final Runnable wakeSoon;
    /** Told the count of each position that ends well. */
    private final LongConsumer ended;

    QueuePositions(Markers markers, Runnable wake, Runnable wakeSoon, LongConsumer ended) {
        this.ended = ended;
        this.markers = markers;
        this.wake = wake;
        this.wakeSoon = wakeSoon;
    }

    /** A position after everything queued so far (the caller has flushed the queue), the {@code count}th command counted. */
    Position next(long count) {
        return next(count, null, count);
    }

    /**
     * As {@link #next(long)}, after {@code command}'s event (taken over: released once the position completes), queued
     * once the queue had counted {@code countBefore}.
     */
    Position next(long count, @Nullable cl_event command, long countBefore) {
        Position position = new Position(this, count, command, countBefore);
        boolean first;
        synchronized (this) {
            first = uncovered.isEmpty();
            uncovered.add(position);
        }
        if (first) {
            wakeSoon.run();
        }
        return position;
    }

    /**
     * Queues one marker after every uncovered position and completes them with it. Positions made while the marker
     * is queued wait for the next. A marker that cannot be queued (the backend closing) completes them at once: the
     * close waits for the whole queue before it frees anything.
     */
    void markUncovered() {
        wakeAsked.set(false); // before taking: a position made after this asks again
        List<Position> covered = takeUncovered(null);
        // the marker is queued after every position taken, so it covers them
        if (covered != null && !markers.mark(covered)) {
            covered.forEach(position -> position.complete(null));
        }
    }

    /**
     * The waiter's turn, which {@link #next}'s soon-wake or a wake asked for: as {@link #markUncovered}, except that on
     * a soon-wake the positions after the last one a kernel's event covers ({@link #coveringCommand}) are left for one
     * more while, unless they were left once already. So a chain of kernels and device accesses is covered by its
     * kernels' events, where a marker would be queued behind whichever access came last.
     */
    void markForWaiter() {
        boolean asked = wakeAsked.getAndSet(false); // before taking: a position made after this asks again
        List<Position> left = new ArrayList<>();
        List<Position> covered = takeForWaiter(!asked, left);
        if (!left.isEmpty()) {
            wakeSoon.run();
        }
        if (covered != null && !markers.mark(covered)) {
            covered.forEach(position -> position.complete(null));
            markUncovered(); // the backend is closing: what was left would wait for a turn that may not come
        }
    }

    /**
     * The uncovered positions for the waiter, now covered; with {@code mayLeave}, the later ones that the last kernel's
     * event among them does not cover stay uncovered, in {@code left}, where none of them was left before.
     */
    private synchronized @Nullable List<Position> takeForWaiter(boolean mayLeave, List<Position> left) {
        if (uncovered.isEmpty()) {
            return null;
        }
        Position covering = null;
        if (mayLeave) {
            for (Position each : uncovered) {
                if (each.command != null && (covering == null || each.count > covering.count)) {
                    covering = each;
                }
            }
        }
        if (covering != null) {
            List<Position> taken = new ArrayList<>();
            for (Position each : uncovered) {
                if (each.count > covering.count) {
                    left.add(each);
                } else {
                    taken.add(each);
                }
            }
            if (QueuePositions.coveringCommand(taken) == covering && left.stream().noneMatch(each -> each.leftOnce)) {
                left.forEach(each -> each.leftOnce = true);
                uncovered.clear();
                uncovered.addAll(left);
                taken.forEach(each -> each.covered = true);
                return taken;
            }
            left.clear();
        }
        return takeUncovered(null);
    }

    /**
     * For a thread about to block in {@code join} on {@code position}: marks the uncovered positions, it among them,
     * and waits for the marker's end on this thread, then completes {@code position} itself when that runs no
     * dependent action, so that the waiter thread is not between the device and the caller. The waiter still settles
     * the rest. A position already covered by a marker under way is left to the waiter, and so is a virtual thread's
     * join: a wait in native code would hold its carrier thread for the whole wait.
     */
    void markAndAwaitHere(Position position) {
        if (position.isDone()) {
            return;
        }
        if (Thread.currentThread().isVirtual()) {
            markUnlessDone(position);
            return;
        }
        List<Position> covered = takeUncovered(position);
        if (covered == null) {
            return;
        }
        switch (markers.markAndAwaitHere(covered)) {
            case ENDED -> {
                if (position.onlyBlockedOn()) {
                    position.complete(null);
                }
            }
            case NOT_QUEUED -> covered.forEach(each -> each.complete(null)); // as markUncovered: the close waits for the queue
            case LEFT_TO_WAITER -> { }
        }
    }

    /**
     * The position among {@code covered} whose command's end completes them all, so that no marker is needed: the last
     * counted, where it has a command and every other was counted before that command was queued (on an in-order
     * queue, whatever a position follows was queued before it was made); null where there is none.
     */
    static @Nullable Position coveringCommand(List<Position> covered) {
        Position last = null;
        for (Position each : covered) {
            if (last == null || each.count > last.count) {
                last = each;
            }
        }
        if (last == null || last.command == null) {
            return null;
        }
        for (Position each : covered) {
            if (each != last && each.count > last.countBefore) {
                return null; // made while the command was being queued, perhaps after it: a marker covers it
            }
        }
        return last;
    }

    /** The uncovered positions, now covered; null when there are none, or when {@code needed} is not among them. */
    private synchronized @Nullable List<Position> takeUncovered(@Nullable Position needed) {
        if (uncovered.isEmpty() || needed != null && needed.covered) {
            return null;
        }
        List<Position> covered = new ArrayList<>(uncovered);
        uncovered.clear();
        covered.forEach(each -> each.covered = true);
        return covered;
    }

    private void wakeUnlessDone(Position position) {
        if (!position.isDone() && !wakeAsked.getAndSet(true)) {
            wake.run();
        }
    }

    private void markUnlessDone(Position position) {
        if (!position.isDone()) {
            markUncovered();
        }
    }
}
