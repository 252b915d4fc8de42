package dev.compute.memory;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import java.time.Duration;
import dev.compute.memory.testing.AddressSpaceBackend;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * {@code allocateBatch} on the simulated device (plain segments): all or none, placed together in a region the pool
 * holds, independent buffers.
 */
class BatchAllocationTest {

    private static final long MiB = 1L << 20;
    private static final MemoryLocation DEVICE = MemoryLocation.DEVICE;

    private final List<UnifiedMemoryManager> managers = new ArrayList<>();

    @AfterEach
    void close() {
        managers.forEach(UnifiedMemoryManager::close);
    }

    private UnifiedMemoryManager manager(UnifiedMemoryManagerBuilder builder) {
        UnifiedMemoryManager manager = builder.backend(new SimulatedDiscreteBackend()).timelineInterval(Duration.ZERO).build();
        managers.add(manager);
        return manager;
    }

    /** A batch through the manager or through a budget. */
    private interface BatchAllocator {
        List<UnifiedBuffer> batch(long[] counts);
    }

    private static List<MemorySnapshot.Block> live(UnifiedMemoryManager manager) {
        return manager.snapshot(DEVICE).segments().stream().flatMap(segment -> segment.blocks().stream())
                .filter(block -> block.state() == MemorySnapshot.BlockState.LIVE).toList();
    }

    @Test
    void whenOneCannotBeHadThoseBeforeItAreGivenBackAndTheExceptionSaysWhichFailed() {
        UnifiedMemoryManager manager = manager(UnifiedMemoryManager.builder().maxPoolSize(80 * MiB));
        long perMiB = MiB / DataType.FLOAT32.byteSize();
        UnifiedBuffer elsewhere = manager.allocate(16 * MiB, DEVICE); // the batch fits the cap, but not beside it

        assertThatThrownBy(() -> manager.allocateBatch(DataType.FLOAT32, new long[] {16 * perMiB, 16 * perMiB, 16 * perMiB, 32 * perMiB}, DEVICE))
                .isInstanceOfSatisfying(DeviceOutOfMemoryException.class, e -> {
                    assertThat(e.requestedBytes()).isEqualTo(32 * MiB);
                    assertThat(e.reason()).isEqualTo(OutOfMemoryReason.POOL_LIMIT);
                    assertThat(e).hasMessageContaining("buffer 4 of a batch of 4").hasMessageContaining("the 3 allocated before it were given back")
                            .hasMessageContaining("max-pool-size");
                });

        elsewhere.close();
        MemoryStatistics figures = manager.statistics(DEVICE);
        assertThat(figures.liveBuffers()).isZero();
        assertThat(figures.allocatedBytes()).isZero();
        assertThat(figures.allocations()).isEqualTo(figures.frees()).isEqualTo(1 + 3);
        List<UnifiedBuffer> fits = manager.allocateBatch(DataType.FLOAT32, new long[] {16 * perMiB, 16 * perMiB, 32 * perMiB}, DEVICE);
        assertThat(fits).hasSize(3);
        fits.forEach(UnifiedBuffer::close);
    }

    /**
     * A batch whose buffers together pass the location's cap can never be had, whatever is freed; it was allocated one
     * buffer after another up to the cap, so the pool gave back its whole cache (the warm-up too), compacted the
     * location and asked the application's out-of-memory handlers to free memory of their own, all for nothing. It fails
     * at once, as a single request above the cap does.
     */
    @Test
    void aBatchAboveTheCapFailsAtOnceWithTheCacheKeptAndNoHandlerAsked() {
        AtomicInteger asked = new AtomicInteger();
        UnifiedMemoryManager manager = manager(UnifiedMemoryManager.builder().maxPoolSize(64 * MiB).warmup(DEVICE, 32 * MiB, 1)
                .outOfMemoryHandler((location, bytes, attempt, failure) -> asked.incrementAndGet() < 0));
        MemoryStatistics before = manager.statistics(DEVICE);

        assertThatThrownBy(() -> manager.allocateBatch(DataType.INT8, new long[] {16 * MiB, 16 * MiB, 16 * MiB, 32 * MiB}, DEVICE))
                .isInstanceOfSatisfying(AllocationAboveLimitException.class, e -> {
                    assertThat(e.requestedBytes()).isEqualTo(80 * MiB);
                    assertThat(e.reason()).isEqualTo(OutOfMemoryReason.POOL_LIMIT);
                    assertThat(e).hasMessageContaining("a batch of 4 buffers totalling " + 80 * MiB + " bytes")
                            .hasMessageContaining("max-pool-size (" + 64 * MiB + " bytes)").hasMessageContaining("nothing was allocated");
                });

        MemoryStatistics after = manager.statistics(DEVICE);
        assertThat(asked).as("out-of-memory handlers asked").hasValue(0);
        assertThat(after.allocations()).as("buffers allocated and given back again").isZero();
        assertThat(after.oomRetries()).as("the pool's recoveries (its cache given back)").isZero();
        assertThat(after.reservedBytes()).as("the warm-up, still cached").isEqualTo(before.reservedBytes());
        assertThat(after.backendAllocations()).isEqualTo(before.backendAllocations());
    }

    /**
     * A batch within the cap in bytes that the pool could still never hold: it takes memory in whole pieces (plain
     * segments of 2 MiB here), and under a cap of 5 MiB its large arena has at most 4 MiB, where the batch's large blocks
     * need 5. It fails at once, saying so, with the cache kept, through the manager as through a budget.
     */
    @Test
    void aBatchWithinTheCapInBytesButNotInThePoolsPiecesFailsAtOnceWithTheCacheKept() {
        AtomicInteger asked = new AtomicInteger();
        UnifiedMemoryManager manager = manager(UnifiedMemoryManager.builder().maxPoolSize(5 * MiB).warmup(DEVICE, MiB / 2, 1)
                .outOfMemoryHandler((location, bytes, attempt, failure) -> asked.incrementAndGet() < 0));
        MemoryStatistics before = manager.statistics(DEVICE);

        try (MemoryBudget tenant = manager.budget(BudgetSpec.of("tenant", 16 * MiB))) {
            for (BatchAllocator through : List.<BatchAllocator>of(
                    counts -> manager.allocateBatch(DataType.INT8, counts, DEVICE), counts -> tenant.allocateBatch(DataType.INT8, counts, DEVICE))) {
                assertThatThrownBy(() -> through.batch(new long[] {2 * MiB, 3 * MiB}))
                        .isInstanceOfSatisfying(AllocationAboveLimitException.class, e -> {
                            assertThat(e.requestedBytes()).isEqualTo(5 * MiB);
                            assertThat(e.reason()).isEqualTo(OutOfMemoryReason.POOL_LIMIT);
                            assertThat(e).hasMessageContaining("a batch of 2 buffers totalling " + 5 * MiB + " bytes (" + 6 * MiB
                                    + " in the pool's pieces: plain segments, in whole " + 2 * MiB + " bytes for blocks over " + MiB
                                    + " bytes and 65536 for smaller ones)").hasMessageContaining("max-pool-size (" + 5 * MiB
                                    + " bytes)").hasMessageContaining("nothing was allocated");
                        });
            }
            assertThat(tenant.statistics().allocatedBytes()).isZero();
        }

        MemoryStatistics after = manager.statistics(DEVICE);
        assertThat(asked).as("out-of-memory handlers asked").hasValue(0);
        assertThat(after.allocations()).as("buffers allocated and given back again").isZero();
        assertThat(after.oomRetries()).as("the pool's recoveries (its cache given back)").isZero();
        assertThat(after.reservedBytes()).as("the warm-up, still cached").isEqualTo(before.reservedBytes());
    }

    @Test
    void aBatchThatFitsOneBufferAfterAnotherInSharedPagesIsNotRefusedAsAboveTheCap() {
        // with expandable segments a large block may take the small arena's pages: half a MiB and a MiB and a half
        // fit in one page of 2 MiB, one after the other as well as in a batch
        UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(new AddressSpaceBackend(1L << 30))
                .timelineInterval(Duration.ZERO).maxPoolSize(2 * MiB).build();
        managers.add(manager);
        long[] bytes = {MiB / 2, 3 * MiB / 2};
        List<UnifiedBuffer> apart = new ArrayList<>();
        for (long size : bytes) {
            apart.add(manager.allocate(size, DEVICE));
        }
        apart.forEach(UnifiedBuffer::close);

        List<UnifiedBuffer> batch = manager.allocateBatch(DataType.INT8, bytes, DEVICE);

        assertThat(batch).extracting(UnifiedBuffer::byteSize).containsExactly(MiB / 2, 3 * MiB / 2);
        batch.forEach(UnifiedBuffer::close);
    }

    /**
     * With plain segments, at the cap a small block takes the free space after a large one in its segment: 1,900 KiB and
     * 64 KiB fit one after the other under a cap of 2 MiB, so a batch of the two is no batch "the pool's pieces could
     * never hold" (it was refused so, the small block counted in a segment of its own).
     */
    @Test
    void aBatchThatFitsOneBufferAfterAnotherInOnePlainSegmentIsNotRefusedAsAboveTheCap() {
        UnifiedMemoryManager manager = manager(UnifiedMemoryManager.builder().maxPoolSize(2 * MiB));
        long[] bytes = {1900 * 1024, 64 * 1024};
        List<UnifiedBuffer> apart = new ArrayList<>();
        for (long size : bytes) {
            apart.add(manager.allocate(size, DEVICE));
        }
        apart.forEach(UnifiedBuffer::close);

        List<UnifiedBuffer> batch = manager.allocateBatch(DataType.INT8, bytes, DEVICE);

        assertThat(batch).extracting(UnifiedBuffer::byteSize).containsExactly(1900 * 1024L, 64 * 1024L);
        batch.forEach(UnifiedBuffer::close);
    }

    @Test
    void aRegionThePoolHoldsTakesTheBatchOneBufferAfterAnotherWithNoBackendCall() {
        UnifiedMemoryManager manager = manager(UnifiedMemoryManager.builder().warmup(DEVICE, 32 * MiB, 1).warmup(DEVICE, MiB, 1));
        long backendCalls = manager.statistics(DEVICE).backendAllocations();

        List<UnifiedBuffer> batch = manager.allocateBatch(DataType.INT8, new long[] {4 * MiB, 100_000, 12 * MiB, 3000, 2 * MiB}, DEVICE);

        assertThat(batch).extracting(UnifiedBuffer::byteSize).containsExactly(4 * MiB, 100_000L, 12 * MiB, 3000L, 2 * MiB);
        assertThat(manager.statistics(DEVICE).backendAllocations()).isEqualTo(backendCalls);
        assertThat(manager.statistics(DEVICE).allocations()).isEqualTo(5);
        List<MemorySnapshot.Block> large = live(manager).stream().filter(block -> block.sizeBytes() > MiB)
                .sorted(Comparator.comparingLong(MemorySnapshot.Block::offset)).toList();
        assertThat(large).extracting(MemorySnapshot.Block::requestedBytes).containsExactly(4 * MiB, 12 * MiB, 2 * MiB);
        assertAdjacent(large);
        List<MemorySnapshot.Block> small = live(manager).stream().filter(block -> block.sizeBytes() <= MiB)
                .sorted(Comparator.comparingLong(MemorySnapshot.Block::offset)).toList();
        assertThat(small).extracting(MemorySnapshot.Block::requestedBytes).containsExactly(100_000L, 3000L);
        assertAdjacent(small);
        batch.forEach(UnifiedBuffer::close);
    }

    private static void assertAdjacent(List<MemorySnapshot.Block> blocks) {
        for (int i = 1; i < blocks.size(); i++) {
            MemorySnapshot.Block before = blocks.get(i - 1);
            assertThat(blocks.get(i).offset()).as("block %d starts where block %d ends", i, i - 1)
                    .isEqualTo(before.offset() + before.sizeBytes());
        }
    }

    @Test
    void buffersOfABatchAreClosedOneByOneAndTheirMemoryGoesBackAlone() {
        UnifiedMemoryManager manager = manager(UnifiedMemoryManager.builder().warmup(DEVICE, 48 * MiB, 1));
        List<UnifiedBuffer> batch = manager.allocateBatch(DataType.FLOAT64, new long[] {MiB, MiB, MiB}, DEVICE);
        double[] values = {1.5, -2.5, 4.0};
        batch.getFirst().copyFrom(values);
        batch.getLast().copyFrom(values);

        batch.get(1).close();

        assertThat(manager.statistics(DEVICE).liveBuffers()).isEqualTo(2);
        assertThat(manager.statistics(DEVICE).allocatedBytes()).isEqualTo(16 * MiB);
        double[] back = new double[3];
        batch.getFirst().copyTo(back);
        assertThat(back).containsExactly(values);
        batch.getLast().copyTo(back);
        assertThat(back).containsExactly(values);
        long backendCalls = manager.statistics(DEVICE).backendAllocations();
        try (UnifiedBuffer again = manager.allocate(DataType.FLOAT64, MiB, DEVICE)) {
            assertThat(manager.statistics(DEVICE).backendAllocations()).isEqualTo(backendCalls);
            assertThat(live(manager)).as("the freed middle is reused").extracting(MemorySnapshot.Block::offset)
                    .containsExactlyInAnyOrder(0L, 8 * MiB, 16 * MiB);
        }
        batch.forEach(UnifiedBuffer::close);
        assertThat(manager.statistics(DEVICE).allocatedBytes()).isZero();
    }

    /**
     * Holes of a buffer's size below a region the batch fits in whole: the batch takes the region, one buffer after
     * another, though one by one each would take a hole. So with out-of-memory handlers and the compaction on
     * out-of-memory in the chain (on by default), which must pass the batch through to the pool.
     */
    @Test
    void aBatchTakesARegionWholeWhereSingleBuffersWouldTakeTheHolesBelowIt() {
        for (UnifiedMemoryManagerBuilder builder : List.of(UnifiedMemoryManager.builder(),
                UnifiedMemoryManager.builder().outOfMemoryHandler((location, bytes, attempt, failure) -> false))) {
            UnifiedMemoryManager manager = manager(builder.warmup(DEVICE, 32 * MiB, 1));
            List<UnifiedBuffer> four = new ArrayList<>();
            for (int i = 0; i < 4; i++) {
                four.add(manager.allocate(4 * MiB, DEVICE));
            }
            four.get(0).close();
            four.get(2).close();

            List<UnifiedBuffer> batch = manager.allocateBatch(DataType.INT8, new long[] {4 * MiB, 4 * MiB, 4 * MiB}, DEVICE);

            List<MemorySnapshot.Block> placed = live(manager).stream().filter(block -> block.offset() >= 16 * MiB)
                    .sorted(Comparator.comparingLong(MemorySnapshot.Block::offset)).toList();
            assertThat(placed).as("the batch, in the region above the buffers").hasSize(3);
            assertAdjacent(placed);
            batch.forEach(UnifiedBuffer::close);
            four.forEach(UnifiedBuffer::close);
        }
    }

    @Test
    void withoutARegionEachBufferIsPlacedAsASingleOne() {
        UnifiedMemoryManager manager = manager(UnifiedMemoryManager.builder());

        List<UnifiedBuffer> batch = manager.allocateBatch(DataType.INT32, new long[] {10, 20, 30});

        assertThat(batch).extracting(UnifiedBuffer::byteSize).containsExactly(40L, 80L, 120L);
        assertThat(batch).extracting(UnifiedBuffer::location).containsOnly(manager.defaultLocation());
        batch.forEach(UnifiedBuffer::close);
    }

    @Test
    void badBatchesAreRefusedBeforeAnythingIsAllocated() {
        UnifiedMemoryManager manager = manager(UnifiedMemoryManager.builder().pinningEnabled(false));

        assertThatThrownBy(() -> manager.allocateBatch(DataType.FLOAT32, new long[0], DEVICE))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("at least one");
        assertThatThrownBy(() -> manager.allocateBatch(DataType.FLOAT32, new long[] {4, 0}, DEVICE))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("counts[1] is 0");
        assertThatThrownBy(() -> manager.allocateBatch(DataType.FLOAT64, new long[] {4, Long.MAX_VALUE / 2}, DEVICE))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("overflow");
        assertThatThrownBy(() -> manager.allocateBatch(DataType.FLOAT32, new long[] {4}, MemoryLocation.PINNED))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("pinning is disabled");
        assertThat(manager.statistics(DEVICE).allocations()).isZero();
    }
}
