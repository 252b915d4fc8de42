package dev.compute.memory;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import dev.compute.memory.testing.LogCapture;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import org.junit.jupiter.api.Test;

class MemoryBudgetTest {

    private static final long MiB = 1L << 20;

    private static UnifiedMemoryManager manager() {
        return UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend()).timelineInterval(Duration.ZERO)
                .trimInterval(Duration.ZERO).maxPoolSize(64 * MiB).build();
    }

    @Test
    void aBudgetCountsItsBuffersAgainstItsLimitAndSharesThePool() {
        try (UnifiedMemoryManager manager = manager(); MemoryBudget tenant = manager.budget("tenant-a", 3 * MiB)) {
            UnifiedBuffer first = tenant.allocate(2 * MiB, MemoryLocation.DEVICE);
            assertThat(tenant.statistics().allocatedBytes()).isEqualTo(2 * MiB);
            assertThat(manager.statistics(MemoryLocation.DEVICE).liveBuffers()).as("from the manager's pool").isEqualTo(1);

            assertThatThrownBy(() -> tenant.allocate(2 * MiB, MemoryLocation.DEVICE))
                    .isInstanceOfSatisfying(DeviceOutOfMemoryException.class, e -> assertThat(e.reason()).isEqualTo(OutOfMemoryReason.BUDGET_LIMIT))
                    .hasMessageContaining("memory budget 'tenant-a'");
            assertThat(manager.statistics(MemoryLocation.DEVICE).liveBuffers()).as("a refusal takes nothing from the pool").isEqualTo(1);
            manager.allocate(10 * MiB, MemoryLocation.DEVICE).close(); // the manager itself is not limited by the budget

            first.close();
            BudgetStatistics figures = tenant.statistics();
            assertThat(figures.allocatedBytes()).isZero();
            assertThat(figures.allocatedBytesPeak()).isEqualTo(2 * MiB);
            assertThat(figures.allocations()).isEqualTo(1);
            assertThat(figures.refusals()).isEqualTo(1);
            assertThat(figures.liveBuffers()).isZero();
            tenant.allocate(3 * MiB, MemoryLocation.DEVICE).close();
        }
    }

    @Test
    void whatABudgetIsToldToRunWhenClosedRunsOnceAfterItsBuffersHoweverItClosesAndAFailureStopsNothing() {
        List<String> ran = new ArrayList<>();
        try (UnifiedMemoryManager manager = manager(); LogCapture log = LogCapture.managerLog()) {
            MemoryBudget tenant = manager.budget("tenant", 8 * MiB);
            MemoryBudget request = tenant.child("request", MiB);
            UnifiedBuffer held = request.allocate(4096, MemoryLocation.DEVICE);
            request.whenClosed(() -> ran.add("request, its buffer closed: " + held.isClosed()));
            tenant.whenClosed(() -> {
                throw new AssertionError("an observer's bug");
            });
            tenant.whenClosed(() -> ran.add("tenant"));

            tenant.close();
            tenant.close();
            tenant.whenClosed(() -> ran.add("tenant, closed already"));
            MemoryBudget other = manager.budget("other", MiB);
            MemoryBudget under = other.child("under", MiB);
            other.whenClosed(() -> ran.add("other"));
            under.whenClosed(() -> ran.add("under"));
            manager.close();

            assertThat(ran).containsExactly("request, its buffer closed: true", "tenant", "tenant, closed already", "other", "under");
            assertThat(log.messages(Level.WARNING)).filteredOn(message -> message.contains("on its close")).singleElement().asString()
                    .contains("memory budget 'tenant'").contains("failed");
        }
    }

    @Test
    void closingABudgetClosesWhatItStillHoldsAndRefusesMore() {
        try (UnifiedMemoryManager manager = manager()) {
            MemoryBudget request = manager.budget("request", 8 * MiB);
            UnifiedBuffer forgotten = request.allocate(DataType.FLOAT32, 1000, MemoryLocation.DEVICE);
            assertThat(manager.budgets()).containsExactly(request);

            request.close();

            assertThat(forgotten.isClosed()).isTrue();
            assertThat(request.statistics().allocatedBytes()).isZero();
            assertThat(manager.statistics(MemoryLocation.DEVICE).liveBuffers()).isZero();
            assertThat(manager.budgets()).isEmpty();
            assertThatThrownBy(() -> request.allocate(16, MemoryLocation.DEVICE)).isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("closed");
        }
    }

    @Test
    void budgetsNestAtMostAHundredLevelsSoThatNoWalkOfTheirBooksOverflowsTheStack() {
        try (UnifiedMemoryManager manager = manager()) {
            MemoryBudget tenant = manager.budget("tenant", 8 * MiB);
            MemoryBudget deepest = tenant;
            for (int level = 1; level < 100; level++) {
                deepest = deepest.child("level-" + level, 8 * MiB);
            }
            MemoryBudget last = deepest;
            UnifiedBuffer held = last.allocate(MiB, MemoryLocation.DEVICE);
            assertThat(tenant.statistics().allocatedBytes()).isEqualTo(MiB);

            // 10,000 levels overflowed the stack on the first allocation (its buffer then held by the pool, counted in no
            // budget) and on the close, which left the tree half closed
            assertThatThrownBy(() -> last.child("level-100", MiB)).isInstanceOf(IllegalStateException.class)
                    .hasMessageEndingWith("/level-99' is 100 levels deep: no budget can be made under it (budgets nest at most 100 levels)");

            tenant.close();
            assertThat(held.isClosed()).isTrue();
            assertThat(tenant.statistics().allocatedBytes()).isZero();
            assertThat(manager.statistics(MemoryLocation.DEVICE).liveBuffers()).isZero();
        }
    }

    @Test
    void aBufferHeldByAViewCountsUntilItsMemoryGoesBack() {
        try (UnifiedMemoryManager manager = manager(); MemoryBudget tenant = manager.budget("views", MiB)) {
            UnifiedBuffer buffer = tenant.allocate(4096, MemoryLocation.HOST);
            CountDownLatch viewing = new CountDownLatch(1);
            CountDownLatch done = new CountDownLatch(1);
            Thread reader = Thread.ofPlatform().start(() -> {
                try (ViewScope scope = ViewScope.open()) { // the view lasts the scope, whoever closes the buffer
                    buffer.hostView();
                    viewing.countDown();
                    try {
                        done.await();
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                }
            });
            try {
                viewing.await();
                buffer.close();
                assertThat(tenant.statistics().allocatedBytes()).as("the view still holds the memory").isEqualTo(4096);
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            } finally {
                done.countDown();
            }
            try {
                reader.join();
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
            assertThat(tenant.statistics().allocatedBytes()).isZero();
        }
    }

    @Test
    void threadsAllocatingAtOnceNeverPassTheLimitTogether() throws InterruptedException {
        try (UnifiedMemoryManager manager = manager(); MemoryBudget tenant = manager.budget("busy", 64 * 1024)) {
            AtomicLong held = new AtomicLong();
            AtomicLong most = new AtomicLong();
            ConcurrentLinkedQueue<UnifiedBuffer> buffers = new ConcurrentLinkedQueue<>();
            List<Thread> threads = new ArrayList<>();
            for (int t = 0; t < 4; t++) {
                threads.add(Thread.ofPlatform().start(() -> {
                    for (int i = 0; i < 2_000; i++) {
                        try {
                            UnifiedBuffer buffer = tenant.allocate(4096, MemoryLocation.HOST);
                            most.accumulateAndGet(held.addAndGet(4096), Math::max);
                            buffers.add(buffer);
                        } catch (DeviceOutOfMemoryException full) {
                            UnifiedBuffer some = buffers.poll();
                            if (some != null) {
                                held.addAndGet(-4096);
                                some.close();
                            }
                        }
                    }
                }));
            }
            for (Thread thread : threads) {
                thread.join();
            }
            assertThat(most.get()).isLessThanOrEqualTo(64 * 1024);
            buffers.forEach(UnifiedBuffer::close);
            assertThat(tenant.statistics().allocatedBytes()).isZero();
        }
    }

    @Test
    void aBudgetWhoseBufferIsOpenWhenTheManagerClosesCountsNothingAfterwards() {
        UnifiedMemoryManager manager = manager();
        MemoryBudget tenant = manager.budget("tenant", 8 * MiB);
        UnifiedBuffer leftOpen = tenant.allocate(2 * MiB, MemoryLocation.DEVICE);
        List<String> warnings = new ArrayList<>();

        manager.close();
        withWarningsTo(warnings, tenant::close);

        assertThat(leftOpen.isClosed()).isTrue();
        assertThat(tenant.isClosed()).as("closed with its manager").isTrue();
        BudgetStatistics figures = tenant.statistics();
        assertThat(figures.allocatedBytes()).as("its memory went back with the manager's").isZero();
        assertThat(figures.liveBuffers()).isZero();
        assertThat(figures.allocatedBytesPeak()).isEqualTo(2 * MiB);
        assertThat(figures.allocations()).as("buffers ever allocated through it, as its peak stays").isEqualTo(1);
        assertThat(manager.budgets()).isEmpty();
        assertThat(warnings).as("nothing is reported as still open").isEmpty();
        assertThatThrownBy(() -> manager.budget("late", MiB)).isInstanceOf(IllegalStateException.class);
    }

    @Test
    void closingABudgetReportsOnlyBuffersStillOpenNotClosedOnesWaitingForAView() throws InterruptedException {
        try (UnifiedMemoryManager manager = manager()) {
            MemoryBudget tenant = manager.budget("tenant", 8 * MiB);
            UnifiedBuffer viewed = tenant.allocate(4096, MemoryLocation.HOST);
            tenant.allocate(8192, MemoryLocation.HOST); // forgotten
            CountDownLatch viewing = new CountDownLatch(1);
            CountDownLatch done = new CountDownLatch(1);
            Thread reader = Thread.ofPlatform().start(() -> {
                try (ViewScope scope = ViewScope.open()) {
                    viewed.hostView();
                    viewing.countDown();
                    awaitQuietly(done);
                }
            });
            viewing.await();
            viewed.close(); // its memory waits for the reader's view
            List<String> warnings = new ArrayList<>();

            withWarningsTo(warnings, tenant::close);

            assertThat(warnings).singleElement().asString().contains("1 buffer(s) of 8192 bytes still open");
            done.countDown();
            reader.join(10_000);
        }
    }

    @Test
    void aRequestThatFailsInThePoolIsNotCountedWhileItFailsNorRefusesOneThatFits() throws Exception {
        CountDownLatch inHandler = new CountDownLatch(1);
        CountDownLatch letGo = new CountDownLatch(1);
        OutOfMemoryHandler slow = (location, bytes, attempt, failure) -> {
            if (bytes == 40 * MiB) {
                inHandler.countDown();
                awaitQuietly(letGo);
            }
            return false;
        };
        ExecutorService threads = Executors.newFixedThreadPool(2);
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend())
                .timelineInterval(Duration.ZERO).trimInterval(Duration.ZERO).maxPoolSize(64 * MiB).outOfMemoryHandler(slow).build();
             UnifiedBuffer others = manager.allocate(32 * MiB, MemoryLocation.DEVICE);
             MemoryBudget tenant = manager.budget("tenant", 56 * MiB)) {
            UnifiedBuffer held = tenant.allocate(16 * MiB, MemoryLocation.DEVICE);
            Future<DeviceOutOfMemoryException> large = threads.submit(() -> {
                try {
                    tenant.allocate(40 * MiB, MemoryLocation.DEVICE).close();
                    return null;
                } catch (DeviceOutOfMemoryException e) {
                    return e;
                }
            });
            assertThat(inHandler.await(10, TimeUnit.SECONDS)).isTrue();

            BudgetStatistics during = tenant.statistics();
            assertThat(during.allocatedBytes()).as("the request under way holds nothing yet").isEqualTo(16 * MiB);
            assertThat(during.liveBuffers()).isEqualTo(1);
            assertThat(during.allocatedBytesPeak()).isEqualTo(16 * MiB);
            Future<UnifiedBuffer> fitting = threads.submit(() -> tenant.allocate(8 * MiB, MemoryLocation.DEVICE));
            letGo.countDown();

            assertThat(large.get(10, TimeUnit.SECONDS)).as("the pool refused it, not the budget").isNotNull()
                    .satisfies(e -> assertThat(e.reason()).isEqualTo(OutOfMemoryReason.POOL_LIMIT));
            UnifiedBuffer eight = fitting.get(10, TimeUnit.SECONDS);
            BudgetStatistics after = tenant.statistics();
            assertThat(after.allocatedBytes()).isEqualTo(24 * MiB);
            assertThat(after.allocatedBytesPeak()).as("never more than the tenant held").isEqualTo(24 * MiB);
            assertThat(after.refusals()).as("the budget refused nothing").isZero();
            eight.close();
            held.close();
        } finally {
            threads.shutdownNow();
        }
    }

    private static void awaitQuietly(CountDownLatch latch) {
        try {
            latch.await(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Runs {@code action} with the manager's log warnings collected in {@code warnings}. */
    private static void withWarningsTo(List<String> warnings, Runnable action) {
        Logger log = Logger.getLogger(UnifiedMemoryManager.class.getName());
        Handler collect = new Handler() {
            @Override
            public void publish(LogRecord record) {
                if (record.getLevel().intValue() >= Level.WARNING.intValue()) {
                    warnings.add(record.getMessage());
                }
            }

            @Override
            public void flush() {}

            @Override
            public void close() {}
        };
        log.addHandler(collect);
        try {
            action.run();
        } finally {
            log.removeHandler(collect);
        }
    }

    /**
     * Room parked at two levels, the parent's own and under the grandparent's limit by a sibling's threads: a child's
     * reservation takes back both before it is refused, as a request does.
     */
    @Test
    void aReservationTakesBackTheRoomParkedAtEveryLevelThatRefusesIt() throws InterruptedException {
        try (UnifiedMemoryManager manager = manager(); MemoryBudget root = manager.budget("root", 34 * MiB)) {
            MemoryBudget parent = root.child("parent", 32 * MiB);
            MemoryBudget sibling = root.child("sibling", 16 * MiB);
            for (MemoryBudget parking : List.of(parent, sibling)) {
                for (int i = 0; i < 4; i++) {
                    Thread thread = Thread.ofPlatform().start(() -> parking.allocate(2 * MiB, MemoryLocation.DEVICE).close());
                    thread.join(TimeUnit.SECONDS.toMillis(20));
                }
            }
            try (MemoryBudget reserving = parent.child(BudgetSpec.of("reserving", 32 * MiB).withReservation(MemoryLocation.DEVICE, 32 * MiB))) {
                assertThat(reserving.statistics().reservedBytes()).isEqualTo(32 * MiB);
            }
        }
    }

    @Test
    void aBudgetNeedsANameAndAPositiveLimit() {
        try (UnifiedMemoryManager manager = manager()) {
            assertThatThrownBy(() -> manager.budget(" ", MiB)).isInstanceOf(IllegalArgumentException.class);
            assertThatThrownBy(() -> manager.budget("zero", 0)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("zero");
        }
    }
}
