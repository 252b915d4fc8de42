package dev.compute.memory.contract;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.AccessMode;
import dev.compute.memory.BudgetExceededException;
import dev.compute.memory.BudgetStatistics;
import dev.compute.memory.DataType;
import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.FileMapMode;
import dev.compute.memory.MemoryBudget;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.OutOfMemoryReason;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.UnifiedMemoryManagerBuilder;
import dev.compute.memory.testing.LogCapture;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.logging.Level;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Every way to get memory, through a budget, on every backend: {@code tryAllocate}, {@code allocateAsync} (the
 * budget's room first, then the pool's), {@code allocateBatch} (all or none against the budget), {@code mapFile}
 * (counted apart), and slices and views, which count nothing more. Subclassed per backend as
 * {@link BudgetContractTest} is.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
public abstract class BudgetAllocationFormsContractTest {

    private static final long MiB = 1L << 20;
    private static final MemoryLocation DEVICE = MemoryLocation.DEVICE;
    private static final Duration LONG = Duration.ofSeconds(30);

    @TempDir
    Path dir;

    protected abstract UnifiedMemoryManagerBuilder builder();

    /** Buffers of {@code size} through the manager itself until the pool refuses one. */
    private static List<UnifiedBuffer> fill(UnifiedMemoryManager manager, long size) {
        List<UnifiedBuffer> held = new ArrayList<>();
        for (Optional<UnifiedBuffer> next; (next = manager.tryAllocate(size, DEVICE)).isPresent(); ) {
            held.add(next.get());
        }
        return held;
    }

    @Test
    void tryAllocateIsEmptyWhereTheBudgetOrThePoolHasNoRoomAndTakesNothingThen() {
        try (UnifiedMemoryManager manager = builder().maxPoolSize(64 * MiB).build(); MemoryBudget tenant = manager.budget("tenant", 16 * MiB)) {
            UnifiedBuffer first = tenant.tryAllocate(8 * MiB, DEVICE).orElseThrow();
            UnifiedBuffer second = tenant.tryAllocate(DataType.FLOAT32, 2 * MiB, DEVICE).orElseThrow();

            assertThat(tenant.tryAllocate(1, DEVICE)).as("the budget is full").isEmpty();
            assertThat(tenant.statistics().refusals()).isEqualTo(1);
            second.close();
            List<UnifiedBuffer> others = fill(manager, 8 * MiB); // the pool full, outside the budget
            assertThat(tenant.tryAllocate(8 * MiB, DEVICE)).as("the pool is full").isEmpty();
            BudgetStatistics figures = tenant.statistics();
            assertThat(figures.allocatedBytes()).as("the pool's refusal gave the budget's claim back").isEqualTo(8 * MiB);
            assertThat(figures.refusals()).as("the pool refused, not the budget").isEqualTo(1);
            others.forEach(UnifiedBuffer::close);
            first.close();
        }
    }

    @Test
    void aWaitingRequestIsServedFromTheBudgetsRoomInTheOrderRequestsCame() throws Exception {
        try (UnifiedMemoryManager manager = builder().maxPoolSize(256 * MiB).build(); MemoryBudget tenant = manager.budget("tenant", 32 * MiB)) {
            List<UnifiedBuffer> held = new ArrayList<>(List.of(tenant.allocate(16 * MiB, DEVICE), tenant.allocate(16 * MiB, DEVICE)));
            CompletableFuture<UnifiedBuffer> large = tenant.allocateAsync(16 * MiB, DEVICE, LONG);
            CompletableFuture<UnifiedBuffer> small = tenant.allocateAsync(DataType.INT32, MiB, DEVICE, LONG);
            assertThat(large).isNotDone();
            assertThat(small).isNotDone();
            assertThat(tenant.statistics().waitingRequests()).isEqualTo(2);

            Thread.ofPlatform().start(held.removeFirst()::close).join();
            UnifiedBuffer first = large.get(30, TimeUnit.SECONDS);
            assertThat(small).as("behind the large one, and no room left after it").isNotDone();
            Thread.ofPlatform().start(held.removeFirst()::close).join();
            UnifiedBuffer second = small.get(30, TimeUnit.SECONDS);

            assertThat(second.byteSize()).isEqualTo(4 * MiB);
            first.copyFrom(new byte[] {7});
            byte[] read = new byte[1];
            first.copyTo(read);
            assertThat(read[0]).isEqualTo((byte) 7);
            BudgetStatistics figures = tenant.statistics();
            assertThat(figures.allocatedBytes()).isEqualTo(20 * MiB);
            assertThat(figures.waitingRequests()).isZero();
            first.close();
            second.close();
        }
    }

    @Test
    void aRequestLetInByTheBudgetThenWaitsForThePoolsRoom() throws Exception {
        try (UnifiedMemoryManager manager = builder().maxPoolSize(64 * MiB).build(); MemoryBudget tenant = manager.budget("tenant", 256 * MiB)) {
            List<UnifiedBuffer> others = fill(manager, 16 * MiB);
            CompletableFuture<UnifiedBuffer> waiting = tenant.allocateAsync(16 * MiB, DEVICE, LONG);

            assertThat(waiting).isNotDone();
            assertThat(manager.statistics(DEVICE).waitingRequests()).as("in the pool's queue").isEqualTo(1);
            assertThat(tenant.statistics().waitingRequests()).as("past the budget's").isZero();
            assertThat(tenant.statistics().allocatedBytes()).as("a request under way is not held yet").isZero();
            Thread.ofPlatform().start(others.removeFirst()::close).join();
            try (UnifiedBuffer served = waiting.get(30, TimeUnit.SECONDS)) {
                assertThat(tenant.statistics().allocatedBytes()).isEqualTo(16 * MiB);
            }
            assertThat(tenant.statistics().allocatedBytes()).isZero();
            others.forEach(UnifiedBuffer::close);
        }
    }

    @Test
    void aClosedBudgetFailsItsRequestsWaitingForThePoolAtOnceAndItsRoomGoesBackToTheBudgetAbove() throws Exception {
        try (UnifiedMemoryManager manager = builder().maxPoolSize(64 * MiB).build(); MemoryBudget tenant = manager.budget("tenant", 16 * MiB)) {
            List<UnifiedBuffer> others = fill(manager, 16 * MiB);
            MemoryBudget request = tenant.child("request", 16 * MiB);
            CompletableFuture<UnifiedBuffer> waiting = request.allocateAsync(16 * MiB, DEVICE, LONG);
            assertThat(manager.statistics(DEVICE).waitingRequests()).as("let in by the budgets, in the pool's queue").isEqualTo(1);

            request.close();

            assertThatThrownBy(() -> waiting.get(10, TimeUnit.SECONDS)).as("failed with the close, not at the end of its wait")
                    .isInstanceOf(ExecutionException.class).cause().isInstanceOf(IllegalStateException.class)
                    .hasMessage("memory budget 'tenant/request' was closed while the request waited for the pool's room");
            assertThat(manager.statistics(DEVICE).waitingRequests()).as("withdrawn from the pool's queue").isZero();
            others.removeFirst().close();
            try (UnifiedBuffer all = tenant.tryAllocate(16 * MiB, DEVICE).orElseThrow()) {
                assertThat(tenant.statistics().allocatedBytes()).as("the closed request's claim holds none of the limit").isEqualTo(16 * MiB);
            }
            assertThat(manager.statistics(DEVICE).liveBuffers()).isEqualTo(others.size());
            others.forEach(UnifiedBuffer::close);
        }
    }

    @Test
    void aRequestThatTimesOutBehindAnEarlierOneIsTheBudgetsRefusal() throws Exception {
        try (UnifiedMemoryManager manager = builder().maxPoolSize(256 * MiB).build(); MemoryBudget tenant = manager.budget("tenant", 16 * MiB);
             UnifiedBuffer held = tenant.allocate(12 * MiB, DEVICE)) {
            CompletableFuture<UnifiedBuffer> ahead = tenant.allocateAsync(8 * MiB, DEVICE, LONG);
            CompletableFuture<UnifiedBuffer> behind = tenant.allocateAsync(MiB, DEVICE, Duration.ofMillis(50));
            CompletableFuture<UnifiedBuffer> now = tenant.allocateAsync(MiB, DEVICE, Duration.ZERO);

            for (CompletableFuture<UnifiedBuffer> refused : List.of(behind, now)) {
                assertThatThrownBy(() -> refused.get(30, TimeUnit.SECONDS)).isInstanceOf(ExecutionException.class).cause()
                        .isInstanceOfSatisfying(BudgetExceededException.class, e -> {
                            assertThat(e.budget()).isEqualTo("tenant");
                            assertThat(e.refusedBy()).isEqualTo("tenant");
                        })
                        .hasMessageContaining("behind earlier requests, which are served first");
            }
            assertThat(ahead).isNotDone();
            ahead.cancel(false);
            assertThat(tenant.statistics().waitingRequests()).isZero();
        }
    }

    @Test
    void aWaitThatEndsInVainSaysWhichBudgetRefusedAndOneThatCouldNeverFitFailsAtOnce() throws Exception {
        try (UnifiedMemoryManager manager = builder().maxPoolSize(256 * MiB).build(); MemoryBudget tenant = manager.budget("tenant", 16 * MiB);
             UnifiedBuffer held = tenant.allocate(16 * MiB, DEVICE)) {
            CompletableFuture<UnifiedBuffer> late = tenant.allocateAsync(MiB, DEVICE, Duration.ofMillis(50));
            assertThatThrownBy(() -> late.get(30, TimeUnit.SECONDS)).isInstanceOf(ExecutionException.class)
                    .cause().isInstanceOf(BudgetExceededException.class)
                    .hasMessageContaining("no room in memory budget 'tenant' for 1048576 bytes of DEVICE within the wait of 50 ms");

            CompletableFuture<UnifiedBuffer> never = tenant.allocateAsync(17 * MiB, DEVICE, LONG);
            assertThat(never).as("no memory given back can make room").isCompletedExceptionally();
            assertThatThrownBy(never::join).cause().isInstanceOf(BudgetExceededException.class).hasMessageContaining("could ever hold");
            CompletableFuture<UnifiedBuffer> now = tenant.allocateAsync(MiB, DEVICE, Duration.ZERO);
            assertThat(now).as("a zero wait tries once").isCompletedExceptionally();
            assertThat(tenant.statistics().refusals()).isEqualTo(3);
            assertThat(tenant.statistics().waitingRequests()).isZero();
        }
    }

    @Test
    void aCancelledRequestLeavesTheQueueAndAClosedBudgetFailsThoseWaiting() throws Exception {
        try (UnifiedMemoryManager manager = builder().maxPoolSize(256 * MiB).build(); LogCapture log = LogCapture.managerLog()) {
            MemoryBudget tenant = manager.budget("tenant", 16 * MiB);
            UnifiedBuffer held = tenant.allocate(16 * MiB, DEVICE);
            CompletableFuture<UnifiedBuffer> cancelled = tenant.allocateAsync(8 * MiB, DEVICE, LONG);
            CompletableFuture<UnifiedBuffer> failed = tenant.allocateAsync(8 * MiB, DEVICE, LONG);

            cancelled.cancel(false);
            assertThat(tenant.statistics().waitingRequests()).isEqualTo(1);
            tenant.close();

            assertThatThrownBy(() -> failed.get(30, TimeUnit.SECONDS)).cause().isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("memory budget 'tenant' was closed while the request waited");
            assertThatThrownBy(cancelled::join).isInstanceOf(CancellationException.class);
            assertThat(held.isClosed()).as("closed with the budget").isTrue();
            assertThat(log.messages(Level.WARNING)).containsExactly("memory budget 'tenant' closed with 1 buffer(s) of 16777216 bytes still open; closing them now");
            assertThat(tenant.statistics().allocatedBytes()).isZero();
            assertThat(tenant.statistics().waitingRequests()).isZero();
            assertThat(manager.statistics(DEVICE).liveBuffers()).as("the cancelled request took nothing").isZero();
            assertThatThrownBy(() -> tenant.allocateAsync(MiB, DEVICE, LONG).join()).cause().isInstanceOf(IllegalStateException.class);
        }
    }

    @Test
    void aBatchIsAllOrNoneAgainstTheBudgetAsAgainstThePool() {
        try (UnifiedMemoryManager manager = builder().maxPoolSize(64 * MiB).build(); MemoryBudget tenant = manager.budget("tenant", 40 * MiB)) {
            assertThatThrownBy(() -> tenant.allocateBatch(DataType.INT8, new long[] {16 * MiB, 16 * MiB, 16 * MiB}, DEVICE))
                    .isInstanceOf(BudgetExceededException.class).hasMessageContaining("for a batch of 3 buffers (none was allocated)");
            assertThat(manager.statistics(DEVICE).liveBuffers()).isZero();
            assertThat(tenant.statistics().allocatedBytes()).isZero();

            List<UnifiedBuffer> batch = tenant.allocateBatch(DataType.INT8, new long[] {16 * MiB, 8 * MiB}, DEVICE);
            BudgetStatistics figures = tenant.statistics();
            assertThat(figures.allocatedBytes()).isEqualTo(24 * MiB);
            assertThat(figures.liveBuffers()).isEqualTo(2);
            assertThat(figures.allocations()).isEqualTo(2);

            List<UnifiedBuffer> others = fill(manager, 16 * MiB); // outside the budgets: the pool is full, the budgets are not
            try (MemoryBudget roomy = manager.budget("roomy", 256 * MiB)) {
                assertThatThrownBy(() -> roomy.allocateBatch(DataType.INT8, new long[] {8 * MiB, 16 * MiB}, DEVICE))
                        .as("the pool refuses what the budget lets in").isInstanceOfSatisfying(DeviceOutOfMemoryException.class,
                                e -> assertThat(e.reason()).isNotEqualTo(OutOfMemoryReason.BUDGET_LIMIT))
                        .hasMessageContaining("of a batch of 2");
                assertThat(roomy.statistics().allocatedBytes()).as("its claim went back").isZero();
                others.forEach(UnifiedBuffer::close);
                roomy.allocateBatch(DataType.INT8, new long[] {8 * MiB, 16 * MiB}, DEVICE).forEach(UnifiedBuffer::close);
            }
            batch.forEach(UnifiedBuffer::close);
            assertThat(tenant.statistics().allocatedBytes()).isZero();
        }
    }

    @Test
    void aMappedFileIsCountedApartAgainstNoLimitAndClosedWithItsBudget() throws Exception {
        Path file = Files.write(dir.resolve("weights.bin"), new byte[(int) MiB]);
        try (UnifiedMemoryManager manager = builder().build(); LogCapture log = LogCapture.managerLog()) {
            MemoryBudget tenant = manager.budget("tenant", 4096);
            UnifiedBuffer mapped = tenant.mapFile(file, DataType.FLOAT32, FileMapMode.READ_ONLY);
            BudgetStatistics figures = tenant.statistics();
            assertThat(figures.mappedFiles()).isEqualTo(1);
            assertThat(figures.mappedBytes()).isEqualTo(MiB);
            assertThat(figures.allocatedBytes()).as("no pooled memory").isZero();
            float[] read = new float[4];
            mapped.copyTo(read);
            assertThat(read).containsOnly(0f);
            mapped.close();
            assertThat(tenant.statistics().mappedFiles()).isZero();
            assertThat(tenant.statistics().mappedBytes()).isZero();

            UnifiedBuffer forgotten = tenant.mapFile(file, DataType.INT8, FileMapMode.READ_ONLY, 4096, 8192);
            assertThat(tenant.closeAndReport()).containsExactly(new MemoryBudget.Leftover("tenant", 1, 8192));
            assertThat(forgotten.isClosed()).isTrue();
            assertThat(manager.mappedFileStatistics().openMappings()).isZero();
            assertThatThrownBy(() -> tenant.mapFile(file, DataType.INT8, FileMapMode.READ_ONLY)).isInstanceOf(IllegalStateException.class);
        }
    }

    @Test
    void slicesAndViewsOfABudgetsBufferCountNothingMore() {
        try (UnifiedMemoryManager manager = builder().build(); MemoryBudget tenant = manager.budget("tenant", MiB)) {
            UnifiedBuffer buffer = tenant.allocate(DataType.INT32, 1024, MemoryLocation.HOST);
            UnifiedBuffer slice = buffer.slice(256, 256);
            slice.copyFrom(new int[] {1, 2, 3});
            try (var access = slice.hostAccess(AccessMode.READ)) {
                assertThat(access.segment().byteSize()).isEqualTo(1024);
            }

            assertThat(tenant.statistics().allocatedBytes()).isEqualTo(4096);
            assertThat(tenant.statistics().liveBuffers()).isEqualTo(1);
            slice.close();
            assertThat(tenant.statistics().allocatedBytes()).as("a slice's close gives nothing back").isEqualTo(4096);
            int[] read = new int[3];
            buffer.slice(256, 3).copyTo(read);
            assertThat(read).containsExactly(1, 2, 3);
            buffer.close();
            assertThat(tenant.statistics().allocatedBytes()).isZero();
        }
    }
}
