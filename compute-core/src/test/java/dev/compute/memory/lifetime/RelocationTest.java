package dev.compute.memory.lifetime;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.AccessMode;
import dev.compute.memory.BufferState;
import dev.compute.memory.DataType;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.lifetime.Relocation.Data;
import dev.compute.memory.lifetime.Relocation.Move;
import dev.compute.memory.resource.Block;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Compaction's step for one buffer: the mover is asked only when nothing holds the buffer, under the buffer's monitor,
 * with the data to keep or drop; device work still in flight is waited for without the monitor, until the deadline.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class RelocationTest {

    private final TestHost host = new TestHost();

    /** Remembers what it was asked, and answers {@code found}. */
    private static final class Mover implements Relocation.BlockMover {
        final boolean found;
        final List<Block> blocks = new ArrayList<>();
        final List<Data> data = new ArrayList<>();
        BufferCore buffer;
        boolean heldMonitor;

        Mover(boolean found) {
            this.found = found;
        }

        @Override
        public boolean move(Block block, Data keep) {
            blocks.add(block);
            data.add(keep);
            heldMonitor = buffer != null && Thread.holdsLock(buffer);
            return found;
        }
    }

    private BufferCore buffer() {
        return host.buffer(MemoryLocation.DEVICE, DataType.INT8, 64);
    }

    private static long soon() {
        return System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    }

    @Test
    void anUnheldBufferIsMovedUnderItsMonitor() {
        BufferCore buffer = buffer();
        Mover mover = new Mover(true);
        mover.buffer = buffer;

        assertThat(Relocation.tryMove(buffer, mover, soon())).isEqualTo(Move.MOVED);

        assertThat(mover.blocks).containsExactly(buffer.ownBlock());
        assertThat(mover.heldMonitor).as("no use can start on the old place meanwhile").isTrue();
        assertThat(Relocation.tryMove(buffer, new Mover(false), soon())).as("no place for it").isEqualTo(Move.NO_PLACE);
    }

    @Test
    void theDataGoesWithTheBlockOnlyWhereTheBlockHoldsACopyOfIt() {
        BufferCore buffer = buffer();
        for (BufferState state : BufferState.values()) {
            synchronized (buffer) {
                buffer.state = state;
            }
            Mover mover = new Mover(true);
            Relocation.tryMove(buffer, mover, soon());
            Data expected = state == BufferState.UNINITIALIZED || state == BufferState.HOST_ONLY ? Data.DROP : Data.KEEP;
            assertThat(mover.data).as("%s", state).containsExactly(expected);
        }
    }

    @Test
    void aBufferSomethingHoldsIsInUseAndTheMoverIsNotAsked() {
        Mover mover = new Mover(true);

        BufferCore held = buffer();
        Holds.deviceRegion(held, AccessMode.READ);
        assertThat(Relocation.tryMove(held, mover, soon())).as("an op holds it").isEqualTo(Move.IN_USE);
        Holds.release(held, null, BufferCore.DONE);
        assertThat(Relocation.tryMove(held, mover, soon())).isEqualTo(Move.MOVED);

        BufferCore viewed = host.buffer(MemoryLocation.HOST, DataType.INT8, 64);
        BufferViews.view(viewed, AccessMode.READ);
        assertThat(Relocation.tryMove(viewed, mover, soon())).as("a view is open").isEqualTo(Move.IN_USE);

        BufferCore closed = buffer();
        closed.close();
        assertThat(Relocation.tryMove(closed, mover, soon())).isEqualTo(Move.IN_USE);

        BufferCore ofAClosedManager = buffer();
        host.closed = true;
        assertThat(Relocation.tryMove(ofAClosedManager, mover, soon())).isEqualTo(Move.IN_USE);
        host.closed = false;

        assertThat(mover.blocks).as("asked once, after the hold ended").hasSize(1);
        host.scopes.endAllOfCurrentThread();
    }

    @Test
    void deviceWorkInFlightIsWaitedForWithoutTheMonitorAndThenTheBufferMoves() throws Exception {
        BufferCore buffer = buffer();
        CompletableFuture<Void> kernel = new CompletableFuture<>();
        synchronized (buffer) {
            buffer.recordInFlight(kernel);
        }
        Mover mover = new Mover(true);
        AtomicReference<Move> moved = new AtomicReference<>();
        Thread compaction = Thread.ofPlatform().start(() -> moved.set(Relocation.tryMove(buffer, mover, soon())));
        BufferCoreTest.waitUntilWaiting(compaction);

        assertThat(buffer.state()).as("the monitor is free while it waits").isEqualTo(BufferState.UNINITIALIZED);
        assertThat(mover.blocks).isEmpty();
        kernel.complete(null);
        compaction.join(10_000);

        assertThat(moved.get()).isEqualTo(Move.MOVED);
        synchronized (buffer) {
            assertThat(buffer.inFlightAll().isDone()).as("the work is over").isTrue();
        }
    }

    @Test
    void workNotDoneByTheDeadlineLeavesTheBufferWhereItIs() {
        BufferCore buffer = buffer();
        CompletableFuture<Void> kernel = new CompletableFuture<>();
        synchronized (buffer) {
            buffer.recordInFlight(kernel);
        }
        Mover mover = new Mover(true);

        long start = System.nanoTime();
        assertThat(Relocation.tryMove(buffer, mover, System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(100))).isEqualTo(Move.WORK_PENDING);

        assertThat(System.nanoTime() - start).as("waited until the deadline").isGreaterThanOrEqualTo(TimeUnit.MILLISECONDS.toNanos(90));
        assertThat(mover.blocks).isEmpty();
        synchronized (buffer) {
            assertThat(buffer.inFlightAll()).as("still recorded").isSameAs(kernel);
        }
    }

    @Test
    void aBufferHeldWhileItsWorkWasWaitedForIsInUse() throws Exception {
        BufferCore buffer = buffer();
        CompletableFuture<Void> kernel = new CompletableFuture<>();
        synchronized (buffer) {
            buffer.recordInFlight(kernel);
        }
        Mover mover = new Mover(true);
        AtomicReference<Move> moved = new AtomicReference<>();
        Thread compaction = Thread.ofPlatform().start(() -> moved.set(Relocation.tryMove(buffer, mover, soon())));
        BufferCoreTest.waitUntilWaiting(compaction);

        BufferScopes open;
        synchronized (buffer) {
            open = buffer.scopes();
        }
        host.scopes.open(MemoryScope.Kind.ACCESS, BufferViews.Sharing.SHARED, open); // an access opened meanwhile
        kernel.complete(null);
        compaction.join(10_000);

        assertThat(moved.get()).isEqualTo(Move.IN_USE);
        assertThat(mover.blocks).isEmpty();
    }
}
