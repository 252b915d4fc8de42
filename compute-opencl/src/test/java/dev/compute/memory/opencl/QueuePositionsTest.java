package dev.compute.memory.opencl;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * When positions ask the waiter to mark, without a device: the markers here complete what they cover at once. The
 * first position after a marker asks for a mark soon, the rest share it; a dependent action attached to a position
 * wakes the waiter at once; a caller that blocks on a position marks itself.
 */
class QueuePositionsTest {

    private final List<List<QueuePositions.Position>> markers = new ArrayList<>();
    private final AtomicInteger wakes = new AtomicInteger();
    private final AtomicInteger wakesSoon = new AtomicInteger();
    private final List<List<QueuePositions.Position>> awaitedHere = new ArrayList<>();
    /** What a marker waited for on the joining thread comes to. */
    private QueuePositions.Marked awaitedMarker = QueuePositions.Marked.ENDED;
    /** The counts of the positions that ended well, as the queue is told them; and the count the next one is made with. */
    private final List<Long> ended = new ArrayList<>();
    private long counted;
    private final QueuePositions positions = new QueuePositions(new QueuePositions.Markers() {
        @Override
        public boolean mark(List<QueuePositions.Position> covered) {
            markers.add(covered);
            covered.forEach(position -> position.complete(null));
            return true;
        }

        @Override
        public QueuePositions.Marked markAndAwaitHere(List<QueuePositions.Position> covered) {
            awaitedHere.add(covered); // the waiter would complete them later; only the joined one completes here
            return awaitedMarker;
        }
    }, wakes::incrementAndGet, wakesSoon::incrementAndGet, ended::add);

    @Test
    void theFirstPositionAfterAMarkerAsksForAMarkSoonAndTheRestShareIt() {
        QueuePositions.Position first = positions.next(++counted);
        QueuePositions.Position second = positions.next(++counted);

        assertThat(wakesSoon).hasValue(1);
        assertThat(wakes).as("no wake-up at once for a position nothing waits on").hasValue(0);
        positions.markUncovered();
        assertThat(markers).containsExactly(List.of(first, second));
        assertThat(first).isDone();

        positions.next(++counted);
        assertThat(wakesSoon).as("the next position after the marker asks again").hasValue(2);
    }

    @Test
    void aDependentActionAttachedToAPositionWakesTheWaiterAtOnce() {
        QueuePositions.Position position = positions.next(++counted);

        CompletableFuture<Void> dependent = position.thenRun(() -> { });
        position.whenComplete((ignored, failure) -> { });

        assertThat(wakes).as("one wake-up serves both").hasValue(1);
        assertThat(dependent).isNotDone();
        positions.markUncovered();
        assertThat(dependent).isDone();
        position.thenRun(() -> { });
        assertThat(wakes).as("nothing to wake for once the position is done").hasValue(1);
    }

    @Test
    void aCallerThatBlocksOnAPositionMarksItself() throws Exception {
        QueuePositions.Position position = positions.next(++counted);

        position.get();

        assertThat(markers).containsExactly(List.of(position));
        assertThat(wakes).hasValue(0);
    }

    @Test
    void aJoinWaitsForItsMarkerOnItsOwnThreadAndCompletesOnlyItsPosition() throws Exception {
        QueuePositions.Position earlier = positions.next(++counted);
        QueuePositions.Position joined = positions.next(++counted);

        joined.join();

        assertThat(awaitedHere).containsExactly(List.of(earlier, joined));
        assertThat(markers).isEmpty();
        assertThat(earlier).as("left to the waiter, which settles the marker too").isNotDone();
        Thread joiner = Thread.ofPlatform().start(earlier::join);
        joiner.join(200);
        assertThat(joiner.isAlive()).as("a covered position waits for the waiter").isTrue();
        assertThat(awaitedHere).as("and is not marked again").hasSize(1);
        earlier.complete(null); // the waiter's settling
        joiner.join(5_000);
        assertThat(joiner.isAlive()).isFalse();
    }

    @Test
    void aVirtualThreadsJoinLeavesTheWaitToTheWaiterSoThatNoCarrierWaitsInNativeCode() throws Exception {
        QueuePositions.Position position = positions.next(++counted);

        Thread.ofVirtual().start(position::join).join(5_000);

        assertThat(position).isDone();
        assertThat(awaitedHere).isEmpty();
        assertThat(markers).containsExactly(List.of(position));
    }

    @Test
    void aJoinOnAPositionWithADependentActionLeavesItToTheWaiter() throws Exception {
        QueuePositions.Position position = positions.next(++counted);
        CompletableFuture<Void> dependent = position.thenRun(() -> { });
        Thread joiner = Thread.ofPlatform().start(position::join);

        joiner.join(200);
        assertThat(joiner.isAlive()).as("the action must not run on the joining thread: it waits for the waiter").isTrue();
        assertThat(awaitedHere).hasSize(1);
        position.complete(null); // the waiter's settling
        joiner.join(5_000);
        assertThat(joiner.isAlive()).isFalse();
        assertThat(dependent).isDone();
    }

    @Test
    void aJoinOnAClosedBackendCompletesWhatItWouldHaveMarked() {
        awaitedMarker = QueuePositions.Marked.NOT_QUEUED;
        QueuePositions.Position earlier = positions.next(++counted);
        QueuePositions.Position joined = positions.next(++counted);

        joined.join();

        assertThat(earlier).isDone();
    }

    @Test
    void aPositionThatEndsWellTellsItsCountAndOneThatFailsDoesNot() {
        QueuePositions.Position failed = positions.next(++counted);
        QueuePositions.Position done = positions.next(++counted);
        failed.completeExceptionally(new IllegalStateException("the queue failed"));
        done.complete(null);
        assertThat(ended).as("what the queue learns has ended").containsExactly(2L);
    }
}
