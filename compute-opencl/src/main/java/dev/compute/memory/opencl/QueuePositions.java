package dev.compute.memory.opencl;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Predicate;

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

        private Position(QueuePositions owner) {
            this.owner = owner;
        }

        @Override
        void beforeBlocking() {
            owner.markUnlessDone(this);
        }

        /** Every dependent action attached through this future's own methods comes here first: its waiter wakes now. */
        @Override
        public <U> CompletableFuture<U> newIncompleteFuture() {
            owner.wakeUnlessDone(this);
            return new CompletableFuture<>();
        }
    }

    private final ArrayDeque<Position> uncovered = new ArrayDeque<>();
    /** Whether the waiter has been asked to mark at once and has not started yet: one wake-up serves every position meanwhile. */
    private final AtomicBoolean wakeAsked = new AtomicBoolean();
    /**
     * Queues a marker on the backend's queue whose end completes the positions given; false once the backend is
     * closed, when nothing was queued.
     */
    private final Predicate<List<Position>> marker;
    private final Runnable wake;
    private final Runnable wakeSoon;

    QueuePositions(Predicate<List<Position>> marker, Runnable wake, Runnable wakeSoon) {
        this.marker = marker;
        this.wake = wake;
        this.wakeSoon = wakeSoon;
    }

    /** A position after everything queued so far (the caller has flushed the queue). */
    Position next() {
        Position position = new Position(this);
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
        List<Position> covered;
        synchronized (this) {
            if (uncovered.isEmpty()) {
                return;
            }
            covered = new ArrayList<>(uncovered);
            uncovered.clear();
        }
        // the marker is queued after every position taken, so it covers them
        if (!marker.test(covered)) {
            covered.forEach(position -> position.complete(null));
        }
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
