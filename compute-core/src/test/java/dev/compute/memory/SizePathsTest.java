package dev.compute.memory;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import dev.compute.memory.testing.ControlledBackend;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Every path that takes a size, an offset or a count, at the edges of a {@code long}: each says what was wrong, with
 * the exception its documentation names, and takes nothing from the pool. None may fail with an arithmetic overflow,
 * a negative size or a wrapped-around offset.
 */
class SizePathsTest {

    private static final long MiB = 1L << 20;
    private static final long HUGE = 1L << 62;
    private static final MemoryLocation DEVICE = MemoryLocation.DEVICE;
    private static final MemoryLocation HOST = MemoryLocation.HOST;

    private final UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend())
            .maxPoolSize(64 * MiB).timelineInterval(Duration.ZERO).trimInterval(Duration.ZERO).build();

    @AfterEach
    void close() {
        assertThat(manager.statistics(DEVICE).liveBuffers() + manager.statistics(HOST).liveBuffers())
                .as("nothing was taken from the pools").isZero();
        manager.close();
    }

    @Test
    void allocationsAboveEveryLimitSaySo() {
        for (long bytes : new long[] {65 * MiB, HUGE, Long.MAX_VALUE}) {
            assertThatThrownBy(() -> manager.allocate(bytes, DEVICE)).isInstanceOf(AllocationAboveLimitException.class)
                    .hasMessageContaining(Long.toString(bytes));
            assertThat(manager.tryAllocate(bytes, DEVICE)).isEmpty();
            assertThat(failureOf(manager.allocateAsync(bytes, DEVICE, Duration.ofSeconds(5))))
                    .isInstanceOf(AllocationAboveLimitException.class);
        }
    }

    @Test
    void underACapThatIsNoWholeNumberOfThePoolsPiecesWhatOnlyItsLastPieceCouldHoldIsAboveTheLimit() {
        AtomicInteger handlersAsked = new AtomicInteger();
        try (UnifiedMemoryManager odd = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend()).maxPoolSize(5 * MiB)
                .timelineInterval(Duration.ZERO).trimInterval(Duration.ZERO)
                .outOfMemoryHandler((location, bytes, attempt, failure) -> handlersAsked.incrementAndGet() > 0 && false).build()) {
            odd.allocate(MiB, DEVICE).close();
            long cached = odd.statistics(DEVICE).cachedBytes();
            // the pool takes memory in pieces of 2 MiB, so under a cap of 5 MiB no buffer above 4 MiB can ever be had
            for (long bytes : new long[] {5 * MiB, 4 * MiB + 1}) {
                assertThatThrownBy(() -> odd.allocate(bytes, DEVICE)).isInstanceOf(AllocationAboveLimitException.class)
                        .hasMessageContaining("requested " + bytes + " bytes").hasMessageContaining("max-pool-size");
                assertThat(odd.tryAllocate(bytes, DEVICE)).isEmpty();
                assertThat(failureOf(odd.allocateAsync(bytes, DEVICE, Duration.ofMinutes(5)))).isInstanceOf(AllocationAboveLimitException.class);
            }
            assertThat(handlersAsked).as("no out-of-memory handler is asked about what no memory can satisfy").hasValue(0);
            assertThat(odd.statistics(DEVICE).cachedBytes()).as("the cache is left as it was").isEqualTo(cached);
            odd.allocate(4 * MiB, DEVICE).close();
        }
    }

    /**
     * A device whose largest single allocation is no whole number of the pool's pieces (an H200's OpenCL: 37,527,470,080
     * bytes): a request for it, rounded to whole pieces, is more than the device allocates at once. The refusal says so
     * and names the largest block the pool gives, which is then had.
     */
    @Test
    void aRequestForTheDevicesLargestAllocationThatThePoolsPiecesPassIsToldTheLargestBlockItCanHave() {
        long largest = 5 * MiB - 4096;
        try (UnifiedMemoryManager odd = UnifiedMemoryManager.builder()
                .backend(new ControlledBackend(new SimulatedDiscreteBackend()).maxAllocationBytes(largest)).maxPoolSize(64 * MiB)
                .timelineInterval(Duration.ZERO).trimInterval(Duration.ZERO).build()) {
            assertThatThrownBy(() -> odd.allocate(largest, DEVICE)).isInstanceOf(AllocationAboveLimitException.class)
                    .hasMessageContaining("requested " + largest + " bytes, " + 6 * MiB + " in the whole pieces")
                    .hasMessageContaining("largest single allocation at DEVICE (" + largest + " bytes)")
                    .hasMessageContaining("the largest block the pool gives at DEVICE is " + 4 * MiB + " bytes");
            odd.allocate(4 * MiB, DEVICE).close();
        }
    }

    @Test
    void elementCountsWhoseBytesOverflowAreRefusedNamingThem() {
        for (long count : new long[] {Long.MAX_VALUE, Long.MAX_VALUE / 8 + 1}) {
            assertThatThrownBy(() -> manager.allocate(DataType.FLOAT64, count, DEVICE)).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("overflow");
            assertThatThrownBy(() -> manager.tryAllocate(DataType.FLOAT64, count, DEVICE)).isInstanceOf(IllegalArgumentException.class);
            assertThatThrownBy(() -> manager.allocateAsync(DataType.FLOAT64, count, DEVICE, Duration.ofSeconds(1)))
                    .isInstanceOf(IllegalArgumentException.class);
            assertThatThrownBy(() -> manager.allocateBatch(DataType.FLOAT64, new long[] {1, count}, DEVICE))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("overflow");
        }
        for (long count : new long[] {0, -1, Long.MIN_VALUE}) {
            assertThatThrownBy(() -> manager.allocate(DataType.FLOAT32, count, DEVICE)).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("positive");
            assertThatThrownBy(() -> manager.allocate(count, DEVICE)).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("positive");
        }
    }

    @Test
    void aBatchWhoseBuffersTogetherOverflowIsAboveEveryLimit() {
        for (long[] counts : new long[][] {{HUGE, HUGE}, {Long.MAX_VALUE, 1}, {1, Long.MAX_VALUE, Long.MAX_VALUE}}) {
            for (MemoryLocation location : new MemoryLocation[] {HOST, DEVICE}) {
                assertThatThrownBy(() -> manager.allocateBatch(DataType.INT8, counts, location))
                        .isInstanceOf(AllocationAboveLimitException.class).hasMessageContaining("batch")
                        .hasMessageContaining("nothing was allocated");
            }
        }
        assertThatThrownBy(() -> manager.allocateBatch(DataType.INT8, new long[] {MiB, HUGE}, DEVICE))
                .as("one buffer above the cap, the sum no overflow").isInstanceOf(AllocationAboveLimitException.class);
    }

    @Test
    void aBudgetRefusesWhatPassesItsLimitWithoutOverflowing() {
        try (MemoryBudget small = manager.budget("small", MiB); MemoryBudget unbounded = manager.budget("unbounded", Long.MAX_VALUE)) {
            assertThatThrownBy(() -> small.allocate(Long.MAX_VALUE, DEVICE)).isInstanceOf(DeviceOutOfMemoryException.class)
                    .hasMessageContaining("memory budget 'small'");
            assertThatThrownBy(() -> unbounded.allocate(Long.MAX_VALUE, DEVICE)).as("within its limit, above the pool's cap")
                    .isInstanceOf(AllocationAboveLimitException.class);
            UnifiedBuffer some = unbounded.allocate(MiB, DEVICE);
            assertThatThrownBy(() -> unbounded.allocate(Long.MAX_VALUE, DEVICE)).as("past its limit with a buffer held")
                    .isInstanceOf(DeviceOutOfMemoryException.class).hasMessageContaining("memory budget 'unbounded'");
            assertThatThrownBy(() -> unbounded.allocate(HUGE, DEVICE)).isInstanceOf(AllocationAboveLimitException.class);
            assertThatThrownBy(() -> unbounded.allocate(DataType.FLOAT64, Long.MAX_VALUE, DEVICE)).isInstanceOf(IllegalArgumentException.class);
            some.close();
            assertThat(unbounded.statistics().allocatedBytes()).isZero();
        }
    }

    @Test
    void offsetsAndLengthsAtTheEdgesOfALongAreOutOfRange() {
        try (UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 16, DEVICE); UnifiedBuffer other = manager.allocate(64, DEVICE)) {
            MemorySegment four = MemorySegment.ofArray(new byte[4]);
            for (long offset : new long[] {-1, 64, Long.MAX_VALUE, Long.MAX_VALUE - 2, Long.MIN_VALUE}) {
                assertThatThrownBy(() -> buffer.copyFrom(offset, four)).isInstanceOf(IndexOutOfBoundsException.class);
                assertThatThrownBy(() -> buffer.copyTo(offset, four)).isInstanceOf(IndexOutOfBoundsException.class);
                assertThatThrownBy(() -> buffer.copyFromAsync(offset, four)).isInstanceOf(IndexOutOfBoundsException.class);
                assertThatThrownBy(() -> buffer.copyToAsync(offset, four)).isInstanceOf(IndexOutOfBoundsException.class);
                assertThatThrownBy(() -> buffer.copyFrom(other, offset, 0, 4)).isInstanceOf(IndexOutOfBoundsException.class);
                assertThatThrownBy(() -> buffer.copyFrom(other, 0, offset, 4)).isInstanceOf(IndexOutOfBoundsException.class);
                assertThatThrownBy(() -> buffer.copyTo(offset, new byte[4], 0, 4)).isInstanceOf(IndexOutOfBoundsException.class);
            }
            assertThatThrownBy(() -> buffer.copyFrom(other, 0, 0, Long.MAX_VALUE)).isInstanceOf(IndexOutOfBoundsException.class);
            assertThatThrownBy(() -> buffer.copyFrom(other, 0, 0, -1)).isInstanceOf(IndexOutOfBoundsException.class);
            assertThatThrownBy(() -> buffer.slice(0, Long.MAX_VALUE)).isInstanceOf(IndexOutOfBoundsException.class);
            assertThatThrownBy(() -> buffer.slice(Long.MAX_VALUE, Long.MAX_VALUE)).isInstanceOf(IndexOutOfBoundsException.class);
            assertThatThrownBy(() -> buffer.slice(Long.MIN_VALUE, 1)).isInstanceOf(IndexOutOfBoundsException.class);
            assertThatThrownBy(() -> buffer.copyTo(0, new byte[4], Integer.MAX_VALUE, 4)).isInstanceOf(IndexOutOfBoundsException.class);
        }
    }

    @Test
    void mappedRangesAtTheEdgesOfALongAreRefusedNamingTheFile(@TempDir Path dir) throws Exception {
        Path file = Files.write(dir.resolve("small.bin"), new byte[4096]);
        for (long[] range : new long[][] {{Long.MAX_VALUE - 10, 100}, {0, Long.MAX_VALUE}, {4096, Long.MAX_VALUE - 4096}, {-4, 8},
                {Long.MIN_VALUE, 8}}) {
            assertThatThrownBy(() -> manager.mapFile(file, DataType.INT8, FileMapMode.READ_ONLY, range[0], range[1]))
                    .as("bytes [%d, +%d)", range[0], range[1]).isInstanceOf(IllegalArgumentException.class);
        }
        assertThat(manager.mappedFileStatistics().openMappings()).isZero();
    }

    @Test
    void settingsAtTheEdgesOfALongFailAtTheStartNamingTheProperty() {
        assertThatThrownBy(() -> UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend()).warmup(DEVICE, Long.MAX_VALUE, 2).build())
                .isInstanceOf(InvalidSettingException.class);
        assertThatThrownBy(() -> UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend()).maxPoolSize(64 * MiB)
                .warmup(DEVICE, HUGE, Integer.MAX_VALUE).build()).isInstanceOf(InvalidSettingException.class);
        assertThatThrownBy(() -> UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend()).maxPoolSize(-1).build())
                .isInstanceOf(InvalidSettingException.class).hasMessageContaining("max-pool-size");
        assertThatThrownBy(() -> UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend()).releaseThreshold(Long.MAX_VALUE).build())
                .isInstanceOf(InvalidSettingException.class).hasMessageContaining("release-threshold");
    }

    private static Throwable failureOf(CompletableFuture<?> future) {
        try {
            future.get(10, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            return e.getCause();
        } catch (Exception e) {
            throw new AssertionError(e);
        }
        throw new AssertionError("completed normally");
    }
}
