package dev.compute.memory;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import dev.compute.memory.spi.ComputeBackend;
import dev.compute.memory.testing.AddressSpaceBackend;
import dev.compute.memory.testing.ControlledBackend;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

/**
 * A reservation holds in the pool, not only in the budgets' books: a tenant that reserved the memory it allocates gets
 * it from the pool at every moment, while a noisy neighbour allocates and frees without pause in every form, its
 * requests waiting, timing out and cancelled as they are served. Memory the neighbour's books have let go of, but the
 * pool has not had back yet (a buffer closing; one made for a request cancelled while it was served), would otherwise
 * be lent again above the neighbour's share, out of the reserved tenant's.
 */
class BudgetReservationUnderNoiseTest {

    private static final long MIB = 1L << 20;

    @Test
    void aReservedTenantAlwaysGetsItsMinimumFromThePool() throws Exception {
        try (UnifiedMemoryManager manager = manager64(new SimulatedDiscreteBackend());
             MemoryBudget gold = manager.budget(BudgetSpec.of("gold", 16 * MIB).withReservation(MemoryLocation.DEVICE, 16 * MIB));
             MemoryBudget noisy = manager.budget("noisy", 64 * MIB)) {
            AtomicBoolean stop = new AtomicBoolean();
            ConcurrentLinkedQueue<String> errors = new ConcurrentLinkedQueue<>();
            List<Thread> neighbours = new ArrayList<>();
            for (int t = 0; t < 4; t++) {
                neighbours.add(Thread.ofPlatform().start(() -> noise(noisy, stop, errors)));
            }
            try {
                for (int round = 0; round < 3000 && errors.isEmpty(); round++) {
                    List<UnifiedBuffer> mine = new ArrayList<>();
                    try {
                        for (int i = 0; i < 16; i++) {
                            mine.add(gold.allocate(MIB, MemoryLocation.DEVICE));
                        }
                    } catch (DeviceOutOfMemoryException e) {
                        errors.add("round " + round + ", buffer " + mine.size() + " of the reserved 16: " + e.getMessage());
                    } finally {
                        mine.forEach(UnifiedBuffer::close);
                    }
                }
            } finally {
                stop.set(true);
                for (Thread neighbour : neighbours) {
                    neighbour.join();
                }
            }
            assertThat(errors).isEmpty();
            assertThat(noisy.statistics().allocatedBytes()).isZero();
            assertThat(manager.statistics(MemoryLocation.DEVICE).liveBuffers()).isZero();
        }
    }

    /**
     * The pool keeps a reservation's room itself, not only the books: a neighbour's buffers cost the pool more than the
     * bytes its books count (a block of 512 bytes for one byte; segments its frees leave with holes too small for what
     * it asks next), so within its own limit it could otherwise fill the pool.
     */
    @Test
    void aNeighboursTinyBuffersCannotFillThePoolPastAReservation() {
        try (UnifiedMemoryManager manager = manager64(new AddressSpaceBackend(1L << 30));
             MemoryBudget reserved = reserving32MiB(manager);
             MemoryBudget noisy = manager.budget("noisy", MIB)) {
            List<UnifiedBuffer> held = new ArrayList<>();
            for (int i = 0; i < 131_072; i++) { // a byte each in its books, a 512-byte block each in the pool
                noisy.tryAllocate(1, MemoryLocation.DEVICE).ifPresent(held::add);
            }
            assertThat(manager.statistics(MemoryLocation.DEVICE).reservedBytes()).as("the neighbour's part of the pool")
                    .isLessThanOrEqualTo(32 * MIB);
            try (UnifiedBuffer first = reserved.allocate(16 * MIB, MemoryLocation.DEVICE);
                 UnifiedBuffer second = reserved.allocate(16 * MIB, MemoryLocation.DEVICE)) {
                assertThat(first.byteSize() + second.byteSize()).isEqualTo(32 * MIB);
            }
            held.forEach(UnifiedBuffer::close);
        }
    }

    @Test
    void aNeighboursFragmentedSegmentsCannotTakeAReservation() {
        try (UnifiedMemoryManager manager = manager64(new SimulatedDiscreteBackend());
             MemoryBudget reserved = reserving32MiB(manager);
             MemoryBudget noisy = manager.budget("noisy", 64 * MIB)) {
            List<UnifiedBuffer> held = new ArrayList<>();
            for (int i = 0; i < 32; i++) {
                noisy.tryAllocate(MIB, MemoryLocation.DEVICE).ifPresent(held::add);
            }
            for (int i = 0; i < held.size(); i += 2) {
                held.get(i).close(); // holes of 1 MiB: what it asks next fits none of them
            }
            for (int i = 0; i < 8; i++) {
                noisy.tryAllocate(2 * MIB, MemoryLocation.DEVICE).ifPresent(held::add);
            }
            try (UnifiedBuffer mine = reserved.allocate(32 * MIB, MemoryLocation.DEVICE)) {
                assertThat(mine.byteSize()).isEqualTo(32 * MIB);
            }
            held.forEach(UnifiedBuffer::close);
        }
    }

    /**
     * Memory the reserved tenant frees stays within its reach while the pool holds it cached: a neighbour that finds it
     * free, and would need no growth to take it, is held to the room the reservation keeps as it is for growth.
     */
    @Test
    void aReservedTenantsFreedMemoryIsNotLentToItsNeighbour() {
        try (UnifiedMemoryManager manager = manager64(new SimulatedDiscreteBackend());
             MemoryBudget reserved = reserving32MiB(manager);
             MemoryBudget noisy = manager.budget("noisy", 64 * MIB)) {
            UnifiedBuffer first = reserved.allocate(16 * MIB, MemoryLocation.DEVICE);
            UnifiedBuffer second = reserved.allocate(16 * MIB, MemoryLocation.DEVICE);
            List<UnifiedBuffer> held = new ArrayList<>();
            while (true) {
                Optional<UnifiedBuffer> more = noisy.tryAllocate(4 * MIB, MemoryLocation.DEVICE);
                if (more.isEmpty()) {
                    break;
                }
                held.add(more.get());
            }
            assertThat(held).as("the neighbour's share of a full pool").hasSize(8);
            second.close(); // 16 MiB back in the tenant's reservation, and cached by the pool
            assertThat(noisy.tryAllocate(4 * MIB, MemoryLocation.DEVICE)).as("the tenant's freed, cached memory").isEmpty();
            assertThatThrownBy(() -> manager.allocate(4 * MIB, MemoryLocation.DEVICE)).isInstanceOf(DeviceOutOfMemoryException.class)
                    .hasMessageContaining("bytes kept for budgets' reservations not in use")
                    .hasMessageContaining("in the arenas of 1 budget reservation(s), which only requests under those take from");
            assertThatThrownBy(() -> manager.allocateBatch(DataType.INT8, new long[] {2 * MIB, 2 * MIB}, MemoryLocation.DEVICE))
                    .isInstanceOf(DeviceOutOfMemoryException.class);
            try (UnifiedBuffer again = reserved.allocate(16 * MIB, MemoryLocation.DEVICE)) {
                assertThat(again.byteSize()).isEqualTo(16 * MIB);
            }
            first.close();
            held.forEach(UnifiedBuffer::close);
            assertThat(manager.statistics(MemoryLocation.DEVICE).liveBuffers()).isZero();
        }
    }

    /**
     * What a reserved tenant frees stays its own while the pool caches it: a neighbour's buffers, within its share,
     * cannot scatter through it, on the same thread (the fast path's cache) or another, with plain segments (where one
     * small block keeps a whole segment) or mapped pages; nor can a neighbour that reserves memory too and asks past its
     * reservation. reservation-churn refused 2 to 50 % of such a tenant's requests.
     */
    @Test
    void aNeighbourCannotScatterThroughWhatAReservedTenantFreed() throws Exception {
        List<Supplier<ComputeBackend>> backends = List.of(SimulatedDiscreteBackend::new, () -> new AddressSpaceBackend(1L << 30));
        for (int run = 0; run < 4; run++) {
            int b = run % 2;
            String layout = (b == 0 ? "plain segments" : "mapped pages") + (run < 2 ? "" : ", a reserving neighbour");
            BudgetSpec neighbour = run < 2 ? BudgetSpec.of("noisy", 64 * MIB)
                    : BudgetSpec.of("noisy", 32 * MIB).withReservation(MemoryLocation.DEVICE, 8 * MIB);
            try (UnifiedMemoryManager manager = manager64(backends.get(b).get());
                 MemoryBudget reserved = reserving32MiB(manager);
                 MemoryBudget noisy = manager.budget(neighbour)) {
                for (int round = 0; round < 3; round++) {
                    List<UnifiedBuffer> mine = new ArrayList<>();
                    for (int i = 0; i < 64; i++) { // small blocks and large ones, freed: cached by the pool
                        mine.add(reserved.allocate(256 * 1024, MemoryLocation.DEVICE));
                    }
                    mine.add(reserved.allocate(16 * MIB, MemoryLocation.DEVICE));
                    mine.forEach(UnifiedBuffer::close);
                    List<UnifiedBuffer> theirs = new ArrayList<>();
                    Thread other = Thread.ofPlatform().start(() -> scatter(noisy, theirs));
                    other.join();
                    scatter(noisy, theirs); // and on the tenant's own thread, whose cache holds the tenant's small blocks
                    try (UnifiedBuffer first = reserved.allocate(16 * MIB, MemoryLocation.DEVICE);
                         UnifiedBuffer second = reserved.allocate(16 * MIB, MemoryLocation.DEVICE)) {
                        assertThat(first.byteSize() + second.byteSize()).as("%s, round %d", layout, round).isEqualTo(32 * MIB);
                    }
                    theirs.forEach(UnifiedBuffer::close);
                }
                assertThat(manager.statistics(MemoryLocation.DEVICE).liveBuffers()).isZero();
            }
        }
    }

    /** Buffers of 64 KiB to 1 MiB through {@code noisy} until refused, then every other one closed: holes everywhere. */
    private static void scatter(MemoryBudget noisy, List<UnifiedBuffer> into) {
        List<UnifiedBuffer> held = new ArrayList<>();
        for (int i = 0; ; i++) {
            Optional<UnifiedBuffer> more = noisy.tryAllocate((i % 16 + 1) * 64 * 1024, MemoryLocation.DEVICE);
            if (more.isEmpty()) {
                break;
            }
            held.add(more.get());
        }
        for (int i = 0; i < held.size(); i++) {
            if (i % 2 == 0) {
                held.get(i).close();
            } else {
                synchronized (into) {
                    into.add(held.get(i));
                }
            }
        }
    }

    /**
     * The memory kept apart for a reservation goes back as its budget closes, open buffers and all: budgets made and
     * closed one after another leave neither memory nor address ranges behind, with mapped pages or plain segments.
     */
    @Test
    void aClosedReservationLeavesNothingBehind() {
        List<Supplier<ComputeBackend>> backends = List.of(SimulatedDiscreteBackend::new, () -> new AddressSpaceBackend(1L << 30));
        for (Supplier<ComputeBackend> backend : backends) {
            try (UnifiedMemoryManager manager = manager64(backend.get())) {
                for (int i = 0; i < 200; i++) {
                    MemoryBudget tenant = manager.budget(BudgetSpec.of("tenant-" + i, 32 * MIB).withReservation(MemoryLocation.DEVICE, 32 * MIB));
                    MemoryBudget child = tenant.child("request", 32 * MIB);
                    tenant.allocate(16 * MIB, MemoryLocation.DEVICE).close(); // cached for the tenant
                    child.allocate(64 * 1024, MemoryLocation.DEVICE); // left open: the close closes it
                    child.allocate(4 * MIB, MemoryLocation.DEVICE);
                    tenant.close();
                    assertThat(manager.statistics(MemoryLocation.DEVICE).reservedBytes()).as("round %d", i).isZero();
                    assertThat(manager.snapshot(MemoryLocation.DEVICE).segments()).as("round %d", i).isEmpty();
                }
                try (UnifiedBuffer all = manager.allocate(64 * MIB, MemoryLocation.DEVICE)) {
                    assertThat(all.byteSize()).isEqualTo(64 * MIB);
                }
            }
        }
    }

    /**
     * A reserving budget closed while device work is queued on its buffers: their blocks wait for the work in the
     * reservation's arenas, given to no one, while the room the reservation kept is free for others at once; as the work
     * ends, the arenas go and every byte comes back.
     */
    @Test
    void aReservationClosedWithDeviceWorkPendingGivesItsMemoryBackAsTheWorkEnds() throws Exception {
        ControlledBackend backend = new ControlledBackend(new SimulatedDiscreteBackend());
        try (UnifiedMemoryManager manager = manager64(backend)) {
            MemoryBudget reserved = reserving32MiB(manager);
            MemoryBudget child = reserved.child(BudgetSpec.of("request", 16 * MIB).withReservation(MemoryLocation.DEVICE, 16 * MIB));
            UnifiedBuffer large = child.allocate(DataType.FLOAT32, 2 * MIB, MemoryLocation.DEVICE);
            UnifiedBuffer small = reserved.allocate(DataType.FLOAT32, 1024, MemoryLocation.DEVICE);
            backend.holdDeviceWork();
            List<CompletableFuture<Void>> work = List.of(manager.ops().fillAsync(large, 3), manager.ops().fillAsync(small, 3));
            reserved.close();
            manager.releaseCachedMemory();

            assertThat(manager.snapshot(MemoryLocation.DEVICE).segments()).flatExtracting(MemorySnapshot.Segment::blocks)
                    .extracting(MemorySnapshot.Block::state).as("the blocks wait for the work")
                    .filteredOn(MemorySnapshot.BlockState.PENDING::equals).hasSize(2);
            try (UnifiedBuffer outside = manager.allocate(40 * MIB, MemoryLocation.DEVICE)) {
                assertThat(outside.byteSize()).as("the closed reservation keeps no room").isEqualTo(40 * MIB);
            }
            backend.releaseDeviceWork();
            for (CompletableFuture<Void> each : work) {
                each.get(10, TimeUnit.SECONDS);
            }
            try (UnifiedBuffer all = manager.allocate(64 * MIB, MemoryLocation.DEVICE)) {
                assertThat(all.byteSize()).isEqualTo(64 * MIB);
            }
            manager.releaseCachedMemory();
            assertThat(manager.statistics(MemoryLocation.DEVICE).reservedBytes()).isZero();
        }
    }

    /**
     * A reservation made while a neighbour already holds memory: the books count the neighbour's 8 MiB and let 56 MiB of
     * the 64 MiB be reserved, but the pool holds that buffer in a plain segment of 20 MiB that it cannot give back while
     * the buffer lives, and the reserving tenant's arenas cannot use the segment's free 12 MiB: the tenant got 32 MiB of
     * its 56 (its third 16 MiB request refused by the pool), with nothing refused as the budget was made. Either answer
     * keeps the promise: the reservation refused as it is made, or all of it served.
     */
    @Test
    void aReservationMadeBesideANeighboursLiveSegmentIsRefusedOrKeptWhole() {
        try (UnifiedMemoryManager manager = manager64(new SimulatedDiscreteBackend());
             MemoryBudget noisy = manager.budget("noisy", 64 * MIB);
             UnifiedBuffer neighbours = noisy.allocate(8 * MIB, MemoryLocation.DEVICE)) {
            MemoryBudget reserved;
            try {
                reserved = manager.budget(BudgetSpec.of("reserved", 56 * MIB).withReservation(MemoryLocation.DEVICE, 56 * MIB));
            } catch (BudgetReservationException refused) {
                assertThat(refused).hasMessageContaining("memory budget 'reserved' cannot reserve 58720256 bytes of DEVICE");
                return;
            }
            try (reserved) {
                for (long bytes : new long[] {16 * MIB, 16 * MIB, 16 * MIB, 8 * MIB}) {
                    reserved.allocate(bytes, MemoryLocation.DEVICE);
                }
                assertThat(reserved.statistics().allocatedBytes()).isEqualTo(56 * MIB);
            }
        }
    }

    /**
     * Memory allocated outside any budget is no budget's, but the pool holds it: a reservation the cap cannot keep beside
     * it is refused as the budget is made, saying by how much, and nothing of it stays counted; once that memory is
     * freed, the check gives the cache back and the same reservation is made and served whole.
     */
    @Test
    void aReservationBesideMemoryOutsideAnyBudgetIsRefusedUntilThatMemoryIsFreed() {
        try (UnifiedMemoryManager manager = manager64(new SimulatedDiscreteBackend())) {
            UnifiedBuffer outside = manager.allocate(48 * MIB, MemoryLocation.DEVICE);
            assertThatThrownBy(() -> reserving32MiB(manager)).isInstanceOf(BudgetReservationException.class)
                    .hasMessageContaining("memory budget 'reserved' cannot reserve 33554432 bytes of DEVICE")
                    .hasMessageContaining("is 16777216 bytes short");
            assertThat(manager.budgets()).isEmpty();

            outside.close();
            try (MemoryBudget reserved = reserving32MiB(manager)) {
                reserved.allocate(32 * MIB, MemoryLocation.DEVICE).close();
                assertThat(reserved.statistics().allocatedBytesPeak()).isEqualTo(32 * MIB);
            }
        }
    }

    /** Memory allocated outside any budget cannot take a reservation's room either; the refusal says what is kept. */
    @Test
    void memoryOutsideTheBudgetsLeavesAReservationsRoom() {
        try (UnifiedMemoryManager manager = manager64(new SimulatedDiscreteBackend());
             MemoryBudget reserved = manager.budget(BudgetSpec.of("reserved", 48 * MIB).withReservation(MemoryLocation.DEVICE, 24 * MIB))) {
            assertThatThrownBy(() -> manager.allocate(48 * MIB, MemoryLocation.DEVICE)).isInstanceOf(DeviceOutOfMemoryException.class)
                    .hasMessageContaining("less the 25165824 bytes kept for budgets' reservations not in use");
            try (UnifiedBuffer outside = manager.allocate(40 * MIB, MemoryLocation.DEVICE);
                 UnifiedBuffer mine = reserved.allocate(24 * MIB, MemoryLocation.DEVICE)) {
                assertThat(outside.byteSize() + mine.byteSize()).isEqualTo(64 * MIB);
            }
        }
        try (UnifiedMemoryManager manager = manager64(new SimulatedDiscreteBackend())) {
            MemoryBudget closed = manager.budget(BudgetSpec.of("reserved", 48 * MIB).withReservation(MemoryLocation.DEVICE, 24 * MIB));
            closed.close();
            manager.allocate(64 * MIB, MemoryLocation.DEVICE).close(); // a closed budget keeps nothing
        }
    }

    /**
     * A reserving child inside a reserving parent reserves more than the parent: the pool keeps the room of both (the
     * parent's requests and the child's take the same arenas, the parent's), not the parent's alone.
     */
    @Test
    void aChildReservingMoreThanItsParentKeepsItsRoomFromMemoryOutsideTheBudgets() {
        try (UnifiedMemoryManager manager = manager64(new SimulatedDiscreteBackend());
             MemoryBudget parent = manager.budget(BudgetSpec.of("parent", 48 * MIB).withReservation(MemoryLocation.DEVICE, 8 * MIB));
             MemoryBudget child = parent.child(BudgetSpec.of("child", 32 * MIB).withReservation(MemoryLocation.DEVICE, 32 * MIB))) {
            assertThatThrownBy(() -> manager.allocate(48 * MIB, MemoryLocation.DEVICE)).isInstanceOf(DeviceOutOfMemoryException.class)
                    .hasMessageContaining("less the " + 32 * MIB + " bytes kept for budgets' reservations not in use");
            try (UnifiedBuffer outside = manager.allocate(32 * MIB, MemoryLocation.DEVICE);
                 UnifiedBuffer mine = child.allocate(32 * MIB, MemoryLocation.DEVICE)) {
                assertThat(outside.byteSize() + mine.byteSize()).isEqualTo(64 * MIB);
            }
        }
    }

    /**
     * Memory a reserved tenant freed inside a segment it still uses is no room for a larger request of its own: plain
     * segments do not grow, so the room kept for it is its reservation beyond its live memory, not beyond what its
     * arenas hold.
     */
    @Test
    void aReservedTenantsFreedMemoryBesideItsLiveBlocksLeavesItsReservationWhole() {
        try (UnifiedMemoryManager manager = manager64(new SimulatedDiscreteBackend());
             MemoryBudget reserved = reserving32MiB(manager)) {
            UnifiedBuffer kept = reserved.allocate(4 * MIB, MemoryLocation.DEVICE);
            reserved.allocate(16 * MIB, MemoryLocation.DEVICE).close(); // beside it in one 20 MiB segment, which stays
            try (UnifiedBuffer outside = manager.allocate(16 * MIB, MemoryLocation.DEVICE)) {
                assertThat(manager.tryAllocate(MIB, MemoryLocation.DEVICE)).as("past the 28 MiB kept").isEmpty();
                reserved.allocate(28 * MIB, MemoryLocation.DEVICE).close();
            }
            kept.close();
        }
    }

    /** A request waiting for the pool's room beside an unused reservation gets it as the reserving budget closes. */
    @Test
    void aRequestWaitingBesideAReservationIsServedWhenTheReservationGoes() throws Exception {
        try (UnifiedMemoryManager manager = manager64(new SimulatedDiscreteBackend())) {
            MemoryBudget reserved = reserving32MiB(manager);
            try (UnifiedBuffer outside = manager.allocate(32 * MIB, MemoryLocation.DEVICE)) {
                CompletableFuture<UnifiedBuffer> waiting = manager.allocateAsync(16 * MIB, MemoryLocation.DEVICE, Duration.ofSeconds(30));
                Thread.sleep(50);
                assertThat(waiting).as("no room beside the reservation").isNotDone();
                long closed = System.nanoTime();
                reserved.close();
                try (UnifiedBuffer served = waiting.get(30, TimeUnit.SECONDS)) {
                    assertThat(Duration.ofNanos(System.nanoTime() - closed)).isLessThan(Duration.ofSeconds(5));
                    assertThat(served.byteSize()).isEqualTo(16 * MIB);
                }
            }
        }
    }

    /**
     * An out-of-memory handler runs inside the reserved tenant's pool call; what it allocates is another's request (a
     * budget without a reservation, or none), which must leave the tenant's unused reservation aside as it would anywhere.
     */
    @Test
    void anOutOfMemoryHandlerInsideAReservedRequestCannotTakeTheReservationForAnother() {
        AtomicReference<UnifiedMemoryManager> managerOfHandler = new AtomicReference<>();
        AtomicReference<MemoryBudget> neighbour = new AtomicReference<>();
        List<String> handled = new ArrayList<>();
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend())
                .timelineInterval(Duration.ZERO).trimInterval(Duration.ZERO).maxPoolSize(64 * MIB).compactOnOutOfMemory(false)
                .outOfMemoryHandler((location, requestedBytes, attempt, failure) -> {
                    handled.add(tryInHandler(() -> neighbour.get().allocate(16 * MIB, location)));
                    handled.add(tryInHandler(() -> managerOfHandler.get().allocate(16 * MIB, location)));
                    return false;
                }).build();
             MemoryBudget reserved = manager.budget(BudgetSpec.of("reserved", 48 * MIB).withReservation(MemoryLocation.DEVICE, 32 * MIB));
             UnifiedBuffer outside = manager.allocate(32 * MIB, MemoryLocation.DEVICE); // all the reservation leaves
             MemoryBudget noisy = manager.budget("noisy", 64 * MIB)) {
            managerOfHandler.set(manager);
            neighbour.set(noisy);
            assertThatThrownBy(() -> reserved.allocate(40 * MIB, MemoryLocation.DEVICE)).isInstanceOf(DeviceOutOfMemoryException.class);
            assertThat(handled).as("32 MiB outside and the 32 MiB reserved and unused leave no room for another's 16")
                    .containsExactly("refused", "refused");
            assertThat(manager.statistics(MemoryLocation.DEVICE).liveBuffers()).isOne();
        }
    }

    private static String tryInHandler(Supplier<UnifiedBuffer> allocation) {
        try {
            allocation.get().close();
            return "allocated";
        } catch (DeviceOutOfMemoryException e) {
            return "refused";
        }
    }

    /** A reservation given back by its budget's close is room at once for a request waiting for the pool. */
    @Test
    void aRequestWaitingForThePoolIsServedWhenAReservationIsGivenBack() throws Exception {
        try (UnifiedMemoryManager manager = manager64(new SimulatedDiscreteBackend());
             MemoryBudget noisy = manager.budget("noisy", 64 * MIB);
             UnifiedBuffer held = manager.allocate(32 * MIB, MemoryLocation.DEVICE)) { // outside the budgets: the books let the request in
            MemoryBudget reserved = reserving32MiB(manager);
            CompletableFuture<UnifiedBuffer> waiting = noisy.allocateAsync(16 * MIB, MemoryLocation.DEVICE, Duration.ofSeconds(20));
            Thread.sleep(300); // its tries on the waiter thread refused too
            assertThat(waiting).as("the pool's room is reserved").isNotDone();
            reserved.close();
            try (UnifiedBuffer served = waiting.get(5, TimeUnit.SECONDS)) {
                assertThat(served.byteSize() + held.byteSize()).isEqualTo(48 * MIB);
            }
        }
    }

    /**
     * A neighbour's request waiting for the pool's room (kept aside for the reservation) holds the head of the queue; a
     * reserved tenant's request within its reservation must not wait behind it for memory no one else may take. Nor
     * may the pool's waiter thread, serving the neighbour while the tenant's request is on its way to the pool, lend the
     * neighbour the memory that request counts as its own (2 to 4 rounds in 300 did, before a request under way stayed
     * kept from others): so, many rounds.
     */
    @Test
    void aReservedRequestIsNotHeldBehindANeighbourWaitingForThePool() throws Exception {
        for (int round = 0; round < 100; round++) {
            try (UnifiedMemoryManager manager = manager64(new SimulatedDiscreteBackend());
                 MemoryBudget reserved = reserving32MiB(manager);
                 MemoryBudget noisy = manager.budget("noisy", 64 * MIB);
                 UnifiedBuffer held = manager.allocate(32 * MIB, MemoryLocation.DEVICE)) {
                CompletableFuture<UnifiedBuffer> neighbours = noisy.allocateAsync(16 * MIB, MemoryLocation.DEVICE, Duration.ofSeconds(20));
                try (UnifiedBuffer mine = reserved.allocateAsync(16 * MIB, MemoryLocation.DEVICE, Duration.ofSeconds(20)).get(5, TimeUnit.SECONDS)) {
                    assertThat(mine.byteSize() + held.byteSize()).isEqualTo(48 * MIB);
                    assertThat(neighbours).as("round %d: the rest of the reservation is kept from the neighbour", round).isNotDone();
                }
                neighbours.cancel(false);
            }
        }
    }

    /** A manager of a 64 MiB pool on {@code backend}, with no timeline and no trims of its own. */
    private static UnifiedMemoryManager manager64(ComputeBackend backend) {
        return UnifiedMemoryManager.builder().backend(backend).timelineInterval(Duration.ZERO).trimInterval(Duration.ZERO)
                .maxPoolSize(64 * MIB).build();
    }

    /** Budget {@code reserved}: 32 MiB of DEVICE, all reserved. */
    private static MemoryBudget reserving32MiB(UnifiedMemoryManager manager) {
        return manager.budget(BudgetSpec.of("reserved", 32 * MIB).withReservation(MemoryLocation.DEVICE, 32 * MIB));
    }

    /** Allocates 1 MiB pieces through {@code noisy} in every form, at random, and frees them in bursts. */
    private static void noise(MemoryBudget noisy, AtomicBoolean stop, ConcurrentLinkedQueue<String> errors) {
        List<UnifiedBuffer> held = new ArrayList<>();
        ThreadLocalRandom random = ThreadLocalRandom.current();
        while (!stop.get()) {
            try {
                switch (random.nextInt(4)) {
                    case 0 -> noisy.tryAllocate(MIB, MemoryLocation.DEVICE).ifPresent(held::add);
                    case 1 -> held.add(noisy.allocate(MIB, MemoryLocation.DEVICE));
                    case 2 -> held.addAll(noisy.allocateBatch(DataType.INT8, new long[] {MIB, MIB}, MemoryLocation.DEVICE));
                    default -> {
                        CompletableFuture<UnifiedBuffer> request = noisy.allocateAsync(MIB, MemoryLocation.DEVICE, Duration.ofMillis(random.nextInt(3)));
                        if (random.nextBoolean()) {
                            request.cancel(false);
                        }
                        try {
                            held.add(request.join());
                        } catch (CancellationException | CompletionException refusedOrCancelled) {
                            // the neighbour's own refusals and cancels: what it gets is not the point
                        }
                    }
                }
            } catch (DeviceOutOfMemoryException refused) {
                // the neighbour at its share
            } catch (Throwable e) {
                errors.add("neighbour: " + e);
            }
            if (held.size() > 40 || random.nextInt(8) == 0) {
                held.forEach(UnifiedBuffer::close);
                held.clear();
            }
        }
        held.forEach(UnifiedBuffer::close);
    }
}
