package dev.compute.memory.contract;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.DataType;
import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemorySnapshot;
import dev.compute.memory.MemoryStatistics;
import dev.compute.memory.PoolSize;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.UnifiedMemoryManagerBuilder;
import java.math.BigDecimal;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * How memory is obtained beyond a plain allocate, on every backend: trying ({@code tryAllocate}), waiting
 * ({@code allocateAsync}), a batch ({@code allocateBatch}), a warm-up at start and a cap given as a share of the
 * device's memory. A backend module subclasses this and says how to begin a builder on its backend; a subclass for
 * hardware that is absent skips in {@link #builder()} with JUnit's {@code Assumptions}. Each test builds managers of
 * its own, with the settings it needs, at DEVICE (which every backend offers).
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
public abstract class AllocationContractTest {

    private static final long MiB = 1L << 20;
    private static final MemoryLocation DEVICE = MemoryLocation.DEVICE;

    /** A builder on the backend under test, timeline sampling off; the test adds its settings. */
    protected abstract UnifiedMemoryManagerBuilder builder();

    /** Allocates 16 MiB buffers until the cap refuses one; at least one fits. */
    private static List<UnifiedBuffer> fill(UnifiedMemoryManager manager) {
        List<UnifiedBuffer> held = new ArrayList<>();
        for (Optional<UnifiedBuffer> next; (next = manager.tryAllocate(16 * MiB, DEVICE)).isPresent(); ) {
            held.add(next.get());
        }
        assertThat(held).isNotEmpty();
        return held;
    }

    private static byte[] pattern(int length, int seed) {
        byte[] bytes = new byte[length];
        for (int i = 0; i < length; i++) {
            bytes[i] = (byte) (i * 31 + seed);
        }
        return bytes;
    }

    private static void roundTrip(UnifiedBuffer buffer, int seed) {
        byte[] written = pattern(4096, seed);
        buffer.copyFrom(written);
        byte[] read = new byte[written.length];
        buffer.copyTo(read);
        assertThat(read).isEqualTo(written);
    }

    @Test
    void tryAllocateIsEmptyAtTheCapAndPresentOnceMemoryIsBack() {
        try (UnifiedMemoryManager manager = builder().maxPoolSize(64 * MiB).build()) {
            List<UnifiedBuffer> held = fill(manager);

            assertThat(manager.tryAllocate(DataType.FLOAT32, 4 * MiB, DEVICE)).isEmpty();
            held.removeFirst().close();
            Optional<UnifiedBuffer> again = manager.tryAllocate(16 * MiB, DEVICE);

            assertThat(again).isPresent();
            roundTrip(again.get(), 1);
            again.get().close();
            held.forEach(UnifiedBuffer::close);
        }
    }

    @Test
    void aWaitingRequestIsServedWhenAnotherThreadClosesABuffer() throws Exception {
        try (UnifiedMemoryManager manager = builder().maxPoolSize(64 * MiB).build()) {
            List<UnifiedBuffer> held = fill(manager);
            CompletableFuture<UnifiedBuffer> waiting = manager.allocateAsync(16 * MiB, DEVICE, Duration.ofSeconds(30));
            assertThat(waiting).isNotDone();
            assertThat(manager.statistics(DEVICE).waitingRequests()).isEqualTo(1);

            UnifiedBuffer released = held.removeFirst();
            Thread.ofPlatform().start(released::close).join();

            try (UnifiedBuffer served = waiting.get(30, TimeUnit.SECONDS)) {
                roundTrip(served, 2);
            }
            MemoryStatistics figures = manager.statistics(DEVICE);
            assertThat(figures.waits()).isEqualTo(1);
            assertThat(figures.waitingRequests()).isZero();
            CompletableFuture<UnifiedBuffer> now = manager.allocateAsync(16 * MiB, DEVICE, Duration.ofMillis(50));
            assertThat(now).as("nothing to wait for: served at once").isCompleted();
            now.join().close();
            held.forEach(UnifiedBuffer::close);
        }
    }

    @Test
    void aBatchIsAllOrNone() {
        try (UnifiedMemoryManager manager = builder().maxPoolSize(64 * MiB).build()) {
            UnifiedBuffer elsewhere = manager.allocate(16 * MiB, DEVICE); // the batch fits the cap, but not beside it
            assertThatThrownBy(() -> manager.allocateBatch(DataType.INT8, new long[] {16 * MiB, 16 * MiB, 16 * MiB, 16 * MiB}, DEVICE))
                    .isInstanceOf(DeviceOutOfMemoryException.class).hasMessageContaining("buffer 4 of a batch of 4");
            elsewhere.close();
            MemoryStatistics afterFailure = manager.statistics(DEVICE);
            assertThat(afterFailure.liveBuffers()).isZero();
            assertThat(afterFailure.allocatedBytes()).isZero();

            List<UnifiedBuffer> batch = manager.allocateBatch(DataType.INT8, new long[] {16 * MiB, 16 * MiB, 16 * MiB}, DEVICE);

            assertThat(batch).hasSize(3).allSatisfy(buffer -> assertThat(buffer.byteSize()).isEqualTo(16 * MiB));
            for (int i = 0; i < batch.size(); i++) {
                roundTrip(batch.get(i), i);
            }
            batch.forEach(UnifiedBuffer::close);
            assertThat(manager.statistics(DEVICE).liveBuffers()).isZero();
        }
    }

    @Test
    void aBatchLandsTogetherInAWarmedRegionWithNoBackendCall() {
        try (UnifiedMemoryManager manager = builder().warmup(DEVICE, 32 * MiB, 1).build()) {
            long backendCalls = manager.statistics(DEVICE).backendAllocations();

            List<UnifiedBuffer> batch = manager.allocateBatch(DataType.FLOAT32, new long[] {MiB, 2 * MiB, MiB}, DEVICE);

            assertThat(manager.statistics(DEVICE).backendAllocations()).isEqualTo(backendCalls);
            List<MemorySnapshot.Segment> holding = manager.snapshot(DEVICE).segments().stream()
                    .filter(segment -> segment.blocks().stream().anyMatch(block -> block.state() == MemorySnapshot.BlockState.LIVE)).toList();
            assertThat(holding).as("one region holds the batch").hasSize(1);
            List<MemorySnapshot.Block> live = holding.getFirst().blocks().stream().filter(block -> block.state() == MemorySnapshot.BlockState.LIVE)
                    .sorted(Comparator.comparingLong(MemorySnapshot.Block::offset)).toList();
            assertThat(live).extracting(MemorySnapshot.Block::requestedBytes).containsExactly(4 * MiB, 8 * MiB, 4 * MiB);
            assertThat(live.get(1).offset()).isEqualTo(live.get(0).offset() + live.get(0).sizeBytes());
            assertThat(live.get(2).offset()).isEqualTo(live.get(1).offset() + live.get(1).sizeBytes());
            for (int i = 0; i < batch.size(); i++) {
                roundTrip(batch.get(i), i);
            }
            batch.forEach(UnifiedBuffer::close);
        }
    }

    @Test
    void theWarmUpIsCachedAtStartAndTheFirstRequestsMakeNoBackendCall() {
        try (UnifiedMemoryManager manager = builder().warmup(DEVICE, 8 * MiB, 2).warmup(DEVICE, 64 * 1024, 8).build()) {
            MemoryStatistics atStart = manager.statistics(DEVICE);
            assertThat(atStart.reservedBytes()).isGreaterThanOrEqualTo(16 * MiB + 512 * 1024);
            assertThat(atStart.cachedBytes()).isEqualTo(atStart.reservedBytes());
            assertThat(atStart.allocations()).isZero();

            List<UnifiedBuffer> first = new ArrayList<>();
            first.add(manager.allocate(8 * MiB, DEVICE));
            first.add(manager.allocate(8 * MiB, DEVICE));
            for (int i = 0; i < 8; i++) {
                first.add(manager.allocate(64 * 1024, DEVICE));
            }

            assertThat(manager.statistics(DEVICE).backendAllocations()).isEqualTo(atStart.backendAllocations());
            roundTrip(first.getFirst(), 3);
            first.forEach(UnifiedBuffer::close);
            assertThat(manager.trim()).as("the warm-up is within the release threshold").isZero();
            assertThat(manager.statistics(DEVICE).reservedBytes()).isEqualTo(atStart.reservedBytes());
        }
    }

    @Test
    void aCapGivenAsAShareIsResolvedAgainstTheDevicesMemory() {
        try (UnifiedMemoryManager manager = builder().maxPoolSize(PoolSize.ofShare(0.5)).build()) {
            long total = manager.deviceMemory().totalBytes();

            assertThat(manager.settings().maxPoolSize()).isEqualTo(BigDecimal.valueOf(total).multiply(BigDecimal.valueOf(0.5)).longValue());
            assertThat(manager.settings().maxPoolSizeShare()).isEqualTo(0.5);
            assertThatThrownBy(() -> manager.allocate(manager.settings().maxPoolSize() + 1, DEVICE))
                    .isInstanceOf(DeviceOutOfMemoryException.class).hasMessageContaining("compute.memory.pooling.max-pool-size");
        }
    }
}
