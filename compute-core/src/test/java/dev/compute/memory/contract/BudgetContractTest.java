package dev.compute.memory.contract;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.BudgetExceededException;
import dev.compute.memory.BudgetReservationException;
import dev.compute.memory.BudgetSpec;
import dev.compute.memory.BudgetStatistics;
import dev.compute.memory.CompactionReport;
import dev.compute.memory.DataType;
import dev.compute.memory.MemoryBudget;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.OutOfMemoryReason;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.UnifiedMemoryManagerBuilder;
import dev.compute.memory.testing.LogCapture;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.logging.Level;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Memory budgets on every backend: limits that hold under threads allocating at once and under compaction, budgets
 * under budgets, a reservation that a noisy neighbour allocating without pause cannot take, limits per location, and
 * closing with buffers still open. A backend module subclasses this and says how to begin a builder on its backend; a
 * subclass for hardware that is absent skips in {@link #builder()}. The allocation forms through a budget are
 * {@link BudgetAllocationFormsContractTest}'s.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
public abstract class BudgetContractTest {

    private static final long MiB = 1L << 20;
    private static final MemoryLocation DEVICE = MemoryLocation.DEVICE;

    /** A builder on the backend under test, timeline sampling off; the test adds its settings. */
    protected abstract UnifiedMemoryManagerBuilder builder();

    @Test
    void aChildsBytesCountInEveryAncestorAndEachLimitRefusesInItsOwnName() {
        try (UnifiedMemoryManager manager = builder().maxPoolSize(256 * MiB).build();
             MemoryBudget tenant = manager.budget("tenant", 24 * MiB)) {
            MemoryBudget request = tenant.child("request", 16 * MiB);
            MemoryBudget step = request.child("step", 8 * MiB);
            MemoryBudget other = tenant.child("other", 16 * MiB);
            UnifiedBuffer inStep = step.allocate(4 * MiB, DEVICE);
            UnifiedBuffer inRequest = request.allocate(8 * MiB, DEVICE);

            assertThat(step.statistics().allocatedBytes()).isEqualTo(4 * MiB);
            assertThat(request.statistics().allocatedBytes()).as("its own and its child's").isEqualTo(12 * MiB);
            assertThat(tenant.statistics().allocatedBytes()).isEqualTo(12 * MiB);
            assertThat(tenant.statistics().liveBuffers()).isEqualTo(2);
            assertThat(step.path()).isEqualTo("tenant/request/step");
            assertThat(tenant.children()).containsExactly(request, other);

            assertThatThrownBy(() -> step.allocate(8 * MiB, DEVICE)).isInstanceOfSatisfying(BudgetExceededException.class, e -> {
                assertThat(e.refusedBy()).isEqualTo("tenant/request/step");
                assertThat(e.reason()).isEqualTo(OutOfMemoryReason.BUDGET_LIMIT);
            }).hasMessageContaining("memory budget 'tenant/request/step' refused 8388608 bytes");
            assertThatThrownBy(() -> request.allocate(8 * MiB, DEVICE))
                    .isInstanceOfSatisfying(BudgetExceededException.class, e -> assertThat(e.refusedBy()).isEqualTo("tenant/request"))
                    .hasMessageContaining("12582912 held in 2 buffer(s)");
            assertThatThrownBy(() -> other.allocate(16 * MiB, DEVICE)).isInstanceOfSatisfying(BudgetExceededException.class, e -> {
                assertThat(e.budget()).isEqualTo("tenant/other");
                assertThat(e.refusedBy()).as("the parent's limit, not the child's").isEqualTo("tenant");
            }).hasMessageContaining("asked of 'tenant/other'");
            assertThat(manager.statistics(DEVICE).liveBuffers()).as("no refusal took anything from the pool").isEqualTo(2);

            UnifiedBuffer inOther = other.allocate(12 * MiB, DEVICE);
            assertThat(tenant.statistics().allocatedBytes()).as("the tenant's whole limit").isEqualTo(24 * MiB);
            inStep.close();
            inRequest.close();
            inOther.close();

            assertThat(List.of(tenant, request, step, other)).allSatisfy(budget -> assertThat(budget.statistics().allocatedBytes()).isZero());
            assertThat(tenant.statistics().refusals()).as("every refusal under it").isEqualTo(3);
            assertThat(request.statistics().refusals()).isEqualTo(2);
            assertThat(step.statistics().refusals()).isEqualTo(1);
            assertThat(tenant.statistics().allocatedBytesPeak()).isEqualTo(24 * MiB);
        }
    }

    /**
     * Two children of one parent, two threads each, allocating and freeing sizes of 64 KiB to 2 MiB as fast as they
     * can; every budget's bytes, as the threads hold them, never pass its limit, and the figures never read more.
     */
    @Test
    void limitsHoldUnderThreadsAllocatingAtOnce() throws InterruptedException {
        try (UnifiedMemoryManager manager = builder().maxPoolSize(256 * MiB).build();
             MemoryBudget parent = manager.budget("parent", 24 * MiB)) {
            List<MemoryBudget> children = List.of(parent.child("a", 16 * MiB), parent.child("b", 16 * MiB));
            AtomicLong parentHeld = new AtomicLong();
            List<AtomicLong> childHeld = List.of(new AtomicLong(), new AtomicLong());
            AtomicLong parentMost = new AtomicLong();
            AtomicLong childMost = new AtomicLong();
            List<String> impossible = new CopyOnWriteArrayList<>();
            AtomicBoolean stop = new AtomicBoolean();
            Thread reader = Thread.ofPlatform().start(() -> {
                while (!stop.get()) {
                    BudgetStatistics figures = parent.statistics();
                    if (figures.allocatedBytes() > 24 * MiB || figures.allocatedBytes() < 0) {
                        impossible.add(figures.toString());
                    }
                }
            });
            List<Thread> threads = new ArrayList<>();
            for (int t = 0; t < 4; t++) {
                int child = t % 2;
                threads.add(Thread.ofPlatform().start(() -> churn(children.get(child), childHeld.get(child), parentHeld, childMost, parentMost)));
            }
            for (Thread thread : threads) {
                thread.join();
            }
            stop.set(true);
            reader.join();

            assertThat(parentMost.get()).isLessThanOrEqualTo(24 * MiB);
            assertThat(childMost.get()).isLessThanOrEqualTo(16 * MiB);
            assertThat(impossible).isEmpty();
            assertThat(parent.statistics().refusals()).as("the limits were reached").isPositive();
            assertThat(parent.statistics().allocatedBytes()).isZero();
            assertThat(parent.statistics().allocatedBytesPeak()).isLessThanOrEqualTo(24 * MiB);
            assertThat(children).allSatisfy(child -> assertThat(child.statistics().allocatedBytesPeak()).isLessThanOrEqualTo(16 * MiB));
            assertThat(manager.statistics(DEVICE).liveBuffers()).isZero();
        }
    }

    private static void churn(MemoryBudget budget, AtomicLong held, AtomicLong parentHeld, AtomicLong childMost, AtomicLong parentMost) {
        List<UnifiedBuffer> mine = new ArrayList<>();
        ThreadLocalRandom random = ThreadLocalRandom.current();
        for (int i = 0; i < 2_000; i++) {
            long size = (64L << 10) << random.nextInt(6);
            Optional<UnifiedBuffer> buffer = budget.tryAllocate(size, DEVICE);
            if (buffer.isPresent()) {
                childMost.accumulateAndGet(held.addAndGet(size), Math::max);
                parentMost.accumulateAndGet(parentHeld.addAndGet(size), Math::max);
                mine.add(buffer.get());
            }
            if (buffer.isEmpty() || random.nextInt(3) == 0) {
                if (!mine.isEmpty()) {
                    UnifiedBuffer some = mine.remove(random.nextInt(mine.size()));
                    held.addAndGet(-some.byteSize());
                    parentHeld.addAndGet(-some.byteSize());
                    some.close();
                }
            }
        }
        for (UnifiedBuffer buffer : mine) {
            held.addAndGet(-buffer.byteSize());
            parentHeld.addAndGet(-buffer.byteSize());
            buffer.close();
        }
    }

    /**
     * Compaction moves a budget's buffers while a tenant allocates and frees through it: the data moves with them,
     * the limit holds, and a moved buffer's close still gives its bytes back to the budget.
     */
    @Test
    void limitsHoldUnderCompaction() throws InterruptedException {
        try (UnifiedMemoryManager manager = builder().maxPoolSize(256 * MiB).build();
             MemoryBudget tenant = manager.budget("tenant", 64 * MiB)) {
            List<UnifiedBuffer> kept = new ArrayList<>();
            List<UnifiedBuffer> dropped = new ArrayList<>();
            for (int i = 0; i < 12; i++) {
                UnifiedBuffer buffer = tenant.allocate(DataType.INT32, MiB, DEVICE);
                buffer.copyFrom(pattern(i));
                (i % 2 == 0 ? kept : dropped).add(buffer);
            }
            dropped.forEach(UnifiedBuffer::close); // holes for compaction to fill
            CompactionReport first = manager.compact(DEVICE);
            AtomicBoolean stop = new AtomicBoolean();
            Thread compacting = Thread.ofPlatform().start(() -> {
                while (!stop.get()) {
                    manager.compact(DEVICE);
                }
            });
            ConcurrentLinkedQueue<UnifiedBuffer> churned = new ConcurrentLinkedQueue<>();
            long most = 0;
            for (int i = 0; i < 400; i++) {
                Optional<UnifiedBuffer> buffer = tenant.tryAllocate(3 * MiB, DEVICE);
                buffer.ifPresent(churned::add);
                most = Math.max(most, tenant.statistics().allocatedBytes());
                if (buffer.isEmpty() || i % 3 == 0) {
                    UnifiedBuffer some = churned.poll();
                    if (some != null) {
                        some.close();
                    }
                }
            }
            stop.set(true);
            compacting.join();
            churned.forEach(UnifiedBuffer::close);

            assertThat(first.buffersMoved()).as("compaction moved the budget's buffers").isPositive();
            assertThat(most).isLessThanOrEqualTo(64 * MiB);
            for (int i = 0; i < kept.size(); i++) {
                int[] read = new int[(int) MiB];
                kept.get(i).copyTo(read);
                assertThat(read).isEqualTo(pattern(2 * i));
            }
            assertThat(tenant.statistics().allocatedBytes()).isEqualTo(kept.size() * 4 * MiB);
            kept.forEach(UnifiedBuffer::close);
            assertThat(tenant.statistics().allocatedBytes()).as("moved buffers give their bytes back").isZero();
            assertThat(tenant.statistics().liveBuffers()).isZero();
        }
    }

    private static int[] pattern(int seed) {
        int[] values = new int[(int) MiB];
        for (int i = 0; i < values.length; i++) {
            values[i] = i * 31 + seed;
        }
        return values;
    }

    /**
     * A reserved budget allocates its whole reservation again and again while a noisy neighbour allocates without
     * pause, keeping all it can: the reserved one is never refused, and the neighbour never holds more than the cap
     * less the reservation.
     */
    @Test
    void aReservationHoldsAgainstANoisyNeighbourAllocatingWithoutPause() throws InterruptedException {
        try (UnifiedMemoryManager manager = builder().maxPoolSize(64 * MiB).build();
             MemoryBudget reserved = manager.budget(BudgetSpec.of("reserved", 32 * MiB).withReservation(DEVICE, 32 * MiB));
             MemoryBudget noisy = manager.budget("noisy", 64 * MiB)) {
            AtomicBoolean stop = new AtomicBoolean();
            AtomicLong noisyMost = new AtomicLong();
            AtomicLong noisyRefusals = new AtomicLong();
            Thread neighbour = Thread.ofPlatform().start(() -> {
                List<UnifiedBuffer> held = new ArrayList<>();
                while (!stop.get()) {
                    Optional<UnifiedBuffer> more = noisy.tryAllocate(16 * MiB, DEVICE);
                    if (more.isPresent()) {
                        held.add(more.get());
                        noisyMost.accumulateAndGet(held.size() * 16 * MiB, Math::max);
                    } else {
                        noisyRefusals.incrementAndGet();
                        held.removeFirst().close();
                    }
                }
                held.forEach(UnifiedBuffer::close);
            });
            try {
                awaitPressing(noisyRefusals);
                for (int round = 0; round < 100 || noisyRefusals.get() < 200; round++) {
                    try (UnifiedBuffer first = reserved.allocate(16 * MiB, DEVICE); UnifiedBuffer second = reserved.allocate(16 * MiB, DEVICE)) {
                        first.copyFrom(new byte[] {(byte) round});
                        second.copyFrom(new byte[] {(byte) -round});
                        byte[] read = new byte[1];
                        first.copyTo(read);
                        assertThat(read[0]).isEqualTo((byte) round);
                    }
                }
            } finally {
                stop.set(true);
                neighbour.join();
            }

            assertThat(reserved.statistics().refusals()).isZero();
            assertThat(noisyRefusals.get()).as("the neighbour pressed against the reservation").isPositive();
            assertThat(noisyMost.get()).isLessThanOrEqualTo(32 * MiB);
            assertThat(noisy.statistics().allocatedBytesPeak()).isLessThanOrEqualTo(32 * MiB);
        }
    }

    /** Waits until the neighbour was refused once: it holds all it can, and presses from then on. */
    private static void awaitPressing(AtomicLong refusals) throws InterruptedException {
        long giveUp = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (refusals.get() == 0 && System.nanoTime() < giveUp) {
            Thread.sleep(1);
        }
        assertThat(refusals.get()).as("the neighbour filled what it may").isPositive();
    }

    @Test
    void aReservationThatCannotBeMetIsRefusedAsTheBudgetIsMadeAndOneGivenBackCanBeMadeAgain() {
        try (UnifiedMemoryManager manager = builder().maxPoolSize(64 * MiB).build()) {
            MemoryBudget first = manager.budget(BudgetSpec.of("first", 48 * MiB).withReservation(DEVICE, 48 * MiB));

            assertThatThrownBy(() -> manager.budget(BudgetSpec.of("second", 24 * MiB).withReservation(DEVICE, 24 * MiB)))
                    .isInstanceOfSatisfying(BudgetReservationException.class, e -> assertThat(e.location()).isEqualTo(DEVICE))
                    .hasMessageContaining("memory budget 'second' cannot reserve 25165824 bytes of DEVICE")
                    .hasMessageContaining("67108864 bytes of DEVICE memory (compute.memory.pooling.max-pool-size)")
                    .hasMessageContaining("first reserves 50331648, holds 0");
            assertThat(manager.budgets()).containsExactly(first);
            assertThatThrownBy(() -> first.child(BudgetSpec.of("too-much", 56 * MiB).withReservation(DEVICE, 56 * MiB)))
                    .isInstanceOf(BudgetReservationException.class).hasMessageContaining("the limit of memory budget 'first'");
            MemoryBudget within = first.child(BudgetSpec.of("within", 16 * MiB).withReservation(DEVICE, 16 * MiB));
            assertThat(first.statistics().reservedBytes()).isEqualTo(48 * MiB);
            assertThat(within.statistics().locations().get(DEVICE).reservedBytes()).isEqualTo(16 * MiB);

            MemoryBudget noisy = manager.budget("noisy", 64 * MiB);
            UnifiedBuffer outside = noisy.allocate(16 * MiB, DEVICE);
            assertThatThrownBy(() -> noisy.allocate(8 * MiB, DEVICE)).isInstanceOf(BudgetExceededException.class)
                    .hasMessageContaining("memory reserved for a budget is kept for it alone").hasMessageContaining("first reserves 50331648");
            UnifiedBuffer inside = within.allocate(16 * MiB, DEVICE);
            assertThatThrownBy(() -> first.allocate(48 * MiB, DEVICE)).as("its child's reservation counts in it")
                    .isInstanceOf(BudgetExceededException.class);
            inside.close();
            outside.close();

            first.close();
            try (MemoryBudget second = manager.budget(BudgetSpec.of("second", 24 * MiB).withReservation(DEVICE, 24 * MiB))) {
                assertThat(second.statistics().reservedBytes()).as("the first's reservation went back as it closed").isEqualTo(24 * MiB);
            }
            noisy.close();
        }
    }

    @Test
    void limitsPerLocationAreKeptApartAndTheLimitAtAllLocationsOverAll() {
        try (UnifiedMemoryManager manager = builder().maxPoolSize(256 * MiB).build();
             MemoryBudget tenant = manager.budget(BudgetSpec.of("tenant", 32 * MiB).withLocationLimit(MemoryLocation.HOST, 4 * MiB));
             UnifiedBuffer host = tenant.allocate(4 * MiB, MemoryLocation.HOST);
             UnifiedBuffer device = tenant.allocate(16 * MiB, DEVICE)) {

            assertThatThrownBy(() -> tenant.allocate(1, MemoryLocation.HOST)).isInstanceOf(BudgetExceededException.class)
                    .hasMessageContaining("the limit of memory budget 'tenant' at HOST of 4194304 bytes");
            assertThatThrownBy(() -> tenant.allocate(16 * MiB, DEVICE)).isInstanceOf(BudgetExceededException.class)
                    .hasMessageContaining("the limit of memory budget 'tenant' of 33554432 bytes");
            BudgetStatistics figures = tenant.statistics();
            assertThat(figures.allocatedBytes()).isEqualTo(20 * MiB);
            assertThat(figures.locations().get(MemoryLocation.HOST)).isEqualTo(new BudgetStatistics.Location(4 * MiB, 0, 4 * MiB, 4 * MiB));
            assertThat(figures.locations().get(DEVICE)).isEqualTo(new BudgetStatistics.Location(32 * MiB, 0, 16 * MiB, 16 * MiB));
            assertThat(figures.usedShare(MemoryLocation.HOST)).isEqualTo(1.0);
            assertThat(figures.usedShare()).as("the fullest of its limits").isEqualTo(1.0);
        }
    }

    @Test
    void closingAParentClosesItsChildrenAndReportsWhatEachStillHeld() {
        try (UnifiedMemoryManager manager = builder().maxPoolSize(256 * MiB).build(); LogCapture log = LogCapture.managerLog()) {
            MemoryBudget tenant = manager.budget("tenant", 64 * MiB);
            MemoryBudget request = tenant.child("request", 32 * MiB);
            MemoryBudget step = request.child("step", 16 * MiB);
            MemoryBudget tidy = tenant.child("tidy", 16 * MiB);
            UnifiedBuffer forgottenInTenant = tenant.allocate(MiB, DEVICE);
            List<UnifiedBuffer> forgottenInRequest = List.of(request.allocate(2 * MiB, DEVICE), request.allocate(MiB, DEVICE));
            UnifiedBuffer forgottenInStep = step.allocate(4 * MiB, DEVICE);
            tidy.allocate(MiB, DEVICE).close();

            List<MemoryBudget.Leftover> left = tenant.closeAndReport();

            assertThat(left).containsExactly(new MemoryBudget.Leftover("tenant/request/step", 1, 4 * MiB),
                    new MemoryBudget.Leftover("tenant/request", 2, 3 * MiB), new MemoryBudget.Leftover("tenant", 1, MiB));
            assertThat(forgottenInTenant.isClosed()).isTrue();
            assertThat(forgottenInRequest).allSatisfy(buffer -> assertThat(buffer.isClosed()).isTrue());
            assertThat(forgottenInStep.isClosed()).isTrue();
            assertThat(List.of(tenant, request, step, tidy)).allSatisfy(budget -> {
                assertThat(budget.isClosed()).isTrue();
                assertThat(budget.statistics().allocatedBytes()).isZero();
                assertThat(budget.children()).isEmpty();
            });
            assertThatThrownBy(() -> step.allocate(1, DEVICE)).isInstanceOf(IllegalStateException.class).hasMessageContaining("closed");
            assertThatThrownBy(() -> request.child("late", MiB)).isInstanceOf(IllegalStateException.class);
            assertThat(manager.budgets()).isEmpty();
            assertThat(manager.statistics(DEVICE).liveBuffers()).isZero();
            assertThat(tenant.closeAndReport()).as("closing twice").isEmpty();
            assertThat(log.messages(Level.WARNING)).as("closeAndReport leaves the reporting to its caller").isEmpty();

            MemoryBudget logged = manager.budget("logged", MiB);
            logged.child("child", MiB).allocate(4096, DEVICE);
            logged.close();
            assertThat(log.messages(Level.WARNING)).containsExactly(
                    "memory budget 'logged/child' closed with 1 buffer(s) of 4096 bytes still open; closing them now");

            // siblings may share a name (each request's child "req"): each is reported on its own, not summed into one
            MemoryBudget shared = manager.budget("shared", 4 * MiB);
            shared.child("req", MiB).allocate(4096, DEVICE);
            shared.child("req", MiB).allocate(8192, DEVICE);
            assertThat(shared.closeAndReport()).containsExactlyInAnyOrder(new MemoryBudget.Leftover("shared/req", 1, 4096),
                    new MemoryBudget.Leftover("shared/req", 1, 8192));
        }
    }
}
