package dev.compute.memory.opencl;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.LongConsumer;
import org.jspecify.annotations.Nullable;

/**
 * Futures for "everything queued on the backend's in-order queue so far", without a command or an event each: a
 * kernel op's or a device access's work is known done once a marker queued after it has ended, and one marker
 * serves every position made before it. So a chain of kernels and accesses costs the device one marker per
 * wake-up of the waiter thread rather than an event per step.
 *
 * <p>The first position after a marker asks the waiter to mark soon ({@code wakeSoon}: within
 * {@link EventCompletions#WAKE_SOON_NANOS}), so that the positions of a chain of steps share a marker and the waiter
 * wakes once for them, not once per step; then it marks every position still uncovered ({@link #markUncovered}).
 * What needs a position done sooner says so: a dependent action attached through the position's own methods wakes the
 * waiter at once ({@code wake}), and a caller that waits on a position itself ({@link Position#get},
 * {@link Position#join}) marks at once. A future that only combines positions (such as {@code allOf}) sees them
 * complete within that while of their commands.
 */
final class QueuePositions {

    /** A position on the queue: completes once a marker queued after it has ended. */
    static final class Position extends EventCompletions.Awaited {
        private final QueuePositions owner;
        /** The queue's count of commands when it was made: once it ends well, every command counted up to there has ended. */
        private final long count;
        /** Set, under the owner's monitor, once a marker covers it. */
        private boolean covered;

        private Position(QueuePositions owner, long count) {
            this.owner = owner;
            this.count = count;
        }

        /** Ended well: says so to the queue ({@link QueuePositions#QueuePositions}'s {@code ended}) before any waiter wakes. */
        @Override
        public boolean complete(Void value) {
            owner.ended.accept(count);
            return super.complete(value);
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
        Position position = new Position(this, count);
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
