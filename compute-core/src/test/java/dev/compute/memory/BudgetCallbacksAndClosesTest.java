package dev.compute.memory;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** Closes from inside callbacks, the manager closing under waiting requests, views and mappings outliving their budget. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class BudgetCallbacksAndClosesTest {

    private static final long MiB = 1L << 20;
    private static final MemoryLocation DEVICE = MemoryLocation.DEVICE;

    @TempDir
    Path dir;

    @Test
    void aBudgetClosedFromTheCallbackOfItsOwnRequestOnTheWaiterThreadClosesEverything() throws Exception {
        try (UnifiedMemoryManager manager = SmallSimulatedPools.builder().build(); MemoryBudget tenant = manager.budget("tenant", 64 * MiB)) {
            MemoryBudget request = tenant.child("request", 32 * MiB);
            UnifiedBuffer kept = request.allocate(8 * MiB, DEVICE);
            List<UnifiedBuffer> others = SmallSimulatedPools.fill(manager, 8 * MiB);
            CompletableFuture<UnifiedBuffer> waiting = request.allocateAsync(8 * MiB, DEVICE, Duration.ofSeconds(30));
            CompletableFuture<List<MemoryBudget.Leftover>> closedInCallback = waiting.thenApply(buffer -> request.closeAndReport());
            Thread.ofPlatform().start(others.removeFirst()::close).join();

            assertThat(closedInCallback.get(30, TimeUnit.SECONDS)).singleElement().satisfies(left -> assertThat(left.buffers()).isEqualTo(2));
            assertThat(kept.isClosed()).isTrue();
            assertThat(waiting.get().isClosed()).isTrue();
            assertThat(tenant.statistics().allocatedBytes()).isZero();
            others.forEach(UnifiedBuffer::close);
        }
    }

    @Test
    void theManagerClosingUnderRequestsWaitingInBothQueuesFailsThemAndLeavesNothingCounted() throws Exception {
        UnifiedMemoryManager manager = SmallSimulatedPools.builder().build();
        MemoryBudget tenant = manager.budget("tenant", 16 * MiB);
        UnifiedBuffer held = tenant.allocate(16 * MiB, DEVICE);
        CompletableFuture<UnifiedBuffer> inBudgetQueue = tenant.allocateAsync(8 * MiB, DEVICE, Duration.ofMinutes(5));
        MemoryBudget other = manager.budget("other", 64 * MiB);
        List<UnifiedBuffer> others = SmallSimulatedPools.fill(manager, 8 * MiB);
        CompletableFuture<UnifiedBuffer> inPoolQueue = other.allocateAsync(8 * MiB, DEVICE, Duration.ofMinutes(5));
        assertThat(tenant.statistics().waitingRequests()).isEqualTo(1);
        assertThat(manager.statistics(DEVICE).waitingRequests()).isEqualTo(1);

        manager.close();

        assertThatThrownBy(() -> inBudgetQueue.get(30, TimeUnit.SECONDS)).isInstanceOf(ExecutionException.class).cause().isInstanceOf(IllegalStateException.class);
        assertThatThrownBy(() -> inPoolQueue.get(30, TimeUnit.SECONDS)).isInstanceOf(ExecutionException.class).cause().isInstanceOf(IllegalStateException.class);
        assertThat(held.isClosed()).isTrue();
        for (MemoryBudget budget : List.of(tenant, other)) {
            BudgetStatistics figures = budget.statistics();
            assertThat(figures.allocatedBytes()).as(figures.toString()).isZero();
            assertThat(figures.waitingRequests()).isZero();
            assertThat(budget.isClosed()).isTrue();
        }
        assertThatThrownBy(() -> tenant.allocate(MiB, DEVICE)).isInstanceOf(IllegalStateException.class);
        assertThat(tenant.closeAndReport()).isEmpty();
    }

    @Test
    void aViewAndAMappingOutliveTheirBudgetsCloseSafely() throws Exception {
        Path file = Files.write(dir.resolve("weights.bin"), new byte[] {1, 2, 3, 4, 5, 6, 7, 8});
        try (UnifiedMemoryManager manager = SmallSimulatedPools.builder().build(); MemoryBudget tenant = manager.budget("tenant", 16 * MiB)) {
            MemoryBudget request = tenant.child("request", 8 * MiB);
            UnifiedBuffer buffer = request.allocate(4 * MiB, DEVICE);
            buffer.copyFrom(new byte[] {42});
            UnifiedBuffer mapped = request.mapFile(file, DataType.INT8, FileMapMode.READ_ONLY);
            UnifiedBuffer slice = buffer.slice(0, MiB);
            assertThat(tenant.statistics().mappedFiles()).isEqualTo(1);

            List<MemoryBudget.Leftover> left = request.closeAndReport();

            assertThat(left).singleElement().satisfies(l -> assertThat(l.buffers()).isEqualTo(2));
            assertThat(mapped.isClosed()).isTrue();
            assertThat(buffer.isClosed()).isTrue();
            assertThatThrownBy(() -> slice.copyTo(new byte[1])).isInstanceOf(IllegalStateException.class);
            assertThatThrownBy(() -> mapped.copyTo(new byte[1])).isInstanceOf(IllegalStateException.class);
            assertThat(tenant.statistics().mappedFiles()).isZero();
            assertThat(tenant.statistics().mappedBytes()).isZero();
            assertThat(tenant.statistics().allocatedBytes()).isZero();
            buffer.close();
            slice.close();
            mapped.close();
            assertThat(tenant.statistics().allocatedBytes()).isZero();
        }
    }
}
