package dev.compute.memory.manager;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.AllocationAboveLimitException;
import dev.compute.memory.DataType;
import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.MemoryEventListener;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemoryTimeline;
import dev.compute.memory.OutOfMemoryReason;
import dev.compute.memory.resource.BackendResource;
import dev.compute.memory.resource.Block;
import dev.compute.memory.resource.MemoryResource;
import dev.compute.memory.resource.NothingInFlight;
import dev.compute.memory.resource.PoolSettings;
import dev.compute.memory.resource.StatisticsResource;
import dev.compute.memory.resource.pool.CachingPoolResource;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import dev.compute.memory.spi.NativeAllocation;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.function.UnaryOperator;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.Test;

/**
 * Blocks as buffers may use them: sizes checked and summed without overflow before anything is taken, out-of-memory
 * told to listeners unless a waiting request retries, a batch all or none (together where the pool places it, else one
 * by one, giving back what was taken), and, where the application's adaptors are in the chain, each block checked to
 * lie within its segment and be as large as asked.
 */
class BlockAllocationTest {

    private static final long MiB = 1L << 20;
    private static final MemoryLocation DEVICE = MemoryLocation.DEVICE;

    private final SimulatedDiscreteBackend device = new SimulatedDiscreteBackend();
    private final ManagerParts.Events events = new ManagerParts.Events();
    private final BlockAllocation allocation = new BlockAllocation(events, new AllocationWaiters<>((type, location, bytes) -> {
        throw new AssertionError("nothing waits here");
    }, block -> { }, events));

    private BackendResource backendResource(long limit) {
        return new BackendResource(device, DEVICE, limit, "compute.memory.pooling.max-pool-size", Duration.ofSeconds(5), MemoryEventListener.NONE);
    }

    private static LocationChain chain(MemoryResource entry, @Nullable CachingPoolResource pool, BackendResource backend,
                                       LocationChain.Adaptors adaptors) {
        StatisticsResource top = new StatisticsResource(entry);
        return new LocationChain(top, top, pool, backend, new MemoryTimeline(8), false, adaptors);
    }

    private record Lying(NativeAllocation segment, long offset, long size, long requestedSize) implements Block {}

    /** An application's adaptor: passes calls up, but may hand out other blocks, place batches its way, or fail. */
    private static class Adaptor implements MemoryResource {
        final MemoryResource upstream;
        UnaryOperator<Block> handOut = block -> block;
        @Nullable List<Block> placed;
        int failAtAllocation = -1;
        int allocations;
        final List<Block> givenBack = new ArrayList<>();

        Adaptor(MemoryResource upstream) {
            this.upstream = upstream;
        }

        @Override
        public Block allocate(long bytes) {
            if (++allocations == failAtAllocation) {
                throw new IllegalStateException("the adaptor failed");
            }
            return handOut.apply(upstream.allocate(bytes));
        }

        @Override
        public @Nullable List<Block> allocateAdjacent(long[] bytes) {
            return placed;
        }

        @Override
        public void deallocate(Block block, CompletableFuture<?> inFlight) {
            givenBack.add(block);
            if (!(block instanceof Lying)) {
                upstream.deallocate(block, inFlight);
            }
        }

        @Override
        public void close() {
            upstream.close();
        }
    }

    @Test
    void elementCountsArePositiveAndTheirBytesDoNotOverflow() {
        assertThat(BlockAllocation.elementBytes(DataType.FLOAT32, 4)).isEqualTo(16);
        assertThatThrownBy(() -> BlockAllocation.elementBytes(DataType.FLOAT32, 0)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("element count must be positive: 0 FLOAT32 elements");
        assertThatThrownBy(() -> BlockAllocation.elementBytes(DataType.INT8, -1)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("allocation size must be positive: -1 bytes");
        assertThatThrownBy(() -> BlockAllocation.elementBytes(DataType.FLOAT64, Long.MAX_VALUE / 4)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("overflow a 64-bit byte count");
    }

    @Test
    void aBatchIsCheckedWholeBeforeAnythingIsTaken() {
        assertThat(BlockAllocation.batchBytes(DataType.FLOAT32, new long[] {1, 2, 3}, DEVICE)).containsExactly(4, 8, 12);
        assertThatThrownBy(() -> BlockAllocation.batchBytes(DataType.INT8, new long[0], DEVICE)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("a batch needs at least one buffer");
        assertThatThrownBy(() -> BlockAllocation.batchBytes(DataType.INT8, new long[] {4, 0}, DEVICE)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("allocation size must be positive: sizes[1] is 0");
        assertThatThrownBy(() -> BlockAllocation.batchBytes(DataType.FLOAT32, new long[] {4, 0}, DEVICE)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("element count must be positive: counts[1] is 0");
        long half = Long.MAX_VALUE / 16;
        assertThatThrownBy(() -> BlockAllocation.batchBytes(DataType.FLOAT64, new long[] {half, half, half}, DEVICE))
                .isInstanceOfSatisfying(AllocationAboveLimitException.class, e -> {
                    assertThat(e.reason()).isEqualTo(OutOfMemoryReason.POOL_LIMIT);
                    assertThat(e.location()).isEqualTo(DEVICE);
                    assertThat(e).hasMessageContaining("a batch whose first 3 of 3 buffers of FLOAT64 already total more than "
                            + Long.MAX_VALUE + " bytes is above every limit: nothing was allocated");
                });
    }

    @Test
    void anOutOfMemoryIsToldUnlessARetryIsSilent() {
        BackendResource limited = backendResource(4 * MiB);
        LocationChain chain = chain(limited, null, limited, LocationChain.Adaptors.NONE);
        Block held = allocation.block(chain, 3 * MiB, BlockAllocation.Failure.REPORT);

        assertThatThrownBy(() -> allocation.block(chain, 2 * MiB, BlockAllocation.Failure.SILENT)).isInstanceOf(DeviceOutOfMemoryException.class);
        assertThat(events.failures).isEmpty();
        assertThatThrownBy(() -> allocation.block(chain, 2 * MiB, BlockAllocation.Failure.REPORT)).isInstanceOf(DeviceOutOfMemoryException.class);

        assertThat(events.failures).containsExactly(new ManagerParts.Events.Failure(DEVICE, 2 * MiB, OutOfMemoryReason.POOL_LIMIT));
        chain.entry.deallocate(held);
        chain.close();
    }

    @Test
    void aBlockFromTheApplicationsAdaptorsMustCoverTheRequestWithinItsSegment() {
        BackendResource upstream = backendResource(64 * MiB);
        Adaptor adaptor = new Adaptor(upstream);
        LocationChain composed = chain(adaptor, null, upstream, LocationChain.Adaptors.COMPOSED);
        LocationChain unchecked = chain(adaptor, null, upstream, LocationChain.Adaptors.NONE);

        adaptor.handOut = block -> new Lying(block.segment(), 0, 512, 1024);
        assertThatThrownBy(() -> allocation.block(composed, 1024, BlockAllocation.Failure.REPORT)).isInstanceOf(IllegalStateException.class)
                .hasMessage("a resource adaptor of the DEVICE chain handed out a block of 512 bytes at offset 0 of a 1024-byte segment"
                        + " for a request of 1024 bytes: a buffer on it would reach memory that is not its own");
        assertThat(adaptor.givenBack).as("the wrong block went back").hasSize(1);

        adaptor.handOut = block -> new Lying(block.segment(), 512, 1024, 1024);
        assertThatThrownBy(() -> allocation.block(composed, 1024, BlockAllocation.Failure.REPORT)).isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("a block of 1024 bytes at offset 512 of a 1024-byte segment");
        adaptor.handOut = block -> new Lying(block.segment(), -1, 1024, 1024);
        assertThatThrownBy(() -> allocation.block(composed, 1024, BlockAllocation.Failure.REPORT)).isInstanceOf(IllegalStateException.class);

        adaptor.handOut = block -> block;
        Block exact = allocation.block(composed, 1024, BlockAllocation.Failure.REPORT);
        assertThat(exact.size()).isEqualTo(1024);
        adaptor.handOut = block -> new Lying(block.segment(), 0, 512, 1024);
        assertThat(allocation.block(unchecked, 1024, BlockAllocation.Failure.REPORT).size()).as("not checked without adaptors")
                .isEqualTo(512);
        assertThat(events.failures).as("no out-of-memory").isEmpty();
    }

    @Test
    void aWrongBlockThatCannotGoBackSaysSoToo() {
        BackendResource upstream = backendResource(64 * MiB);
        Adaptor adaptor = new Adaptor(upstream) {
            @Override
            public void deallocate(Block block, CompletableFuture<?> inFlight) {
                throw new IllegalArgumentException("not mine");
            }
        };
        adaptor.handOut = block -> new Lying(block.segment(), 0, 512, 1024);
        LocationChain composed = chain(adaptor, null, upstream, LocationChain.Adaptors.COMPOSED);

        assertThatThrownBy(() -> allocation.block(composed, 1024, BlockAllocation.Failure.REPORT)).isInstanceOf(IllegalStateException.class)
                .satisfies(e -> assertThat(e.getSuppressed()).singleElement().satisfies(s -> assertThat(s).hasMessage("not mine")));
    }

    @Test
    void aBatchThePoolPlacesTogetherComesBackInOrderOneAfterAnother() {
        BackendResource upstream = backendResource(256 * MiB);
        CachingPoolResource pool = new CachingPoolResource(upstream, PoolSettings.plainSegments(), MemoryEventListener.NONE);
        LocationChain chain = chain(pool, pool, upstream, LocationChain.Adaptors.NONE);
        chain.entry.deallocate(chain.entry.allocate(16 * MiB)); // memory the pool holds, to place the batch in

        List<Block> blocks = allocation.batch(chain, new long[] {2 * MiB, MiB + 512, 3 * MiB});

        assertThat(blocks).extracting(Block::requestedSize).containsExactly(2 * MiB, MiB + 512, 3 * MiB);
        for (int i = 1; i < blocks.size(); i++) {
            assertThat(blocks.get(i).segment()).isSameAs(blocks.getFirst().segment());
            assertThat(blocks.get(i).offset()).isEqualTo(blocks.get(i - 1).offset() + blocks.get(i - 1).size());
        }
        assertThat(chain.top.counts().allocations()).isEqualTo(4);
        chain.close();
    }

    @Test
    void aBatchTakenOneByOneGivesBackWhatItTookWhenOneFails() {
        BackendResource limited = backendResource(4 * MiB);
        LocationChain chain = chain(limited, null, limited, LocationChain.Adaptors.NONE);
        Block elsewhere = limited.allocate(MiB); // the batch fits the cap, but not beside it

        assertThatThrownBy(() -> allocation.batch(chain, new long[] {MiB, MiB, 2 * MiB}))
                .isExactlyInstanceOf(DeviceOutOfMemoryException.class)
                .hasMessageStartingWith("buffer 3 of a batch of 3 (" + 2 * MiB + " bytes) could not be allocated, so the 2 allocated before it"
                        + " were given back: ")
                .hasCauseInstanceOf(DeviceOutOfMemoryException.class)
                .satisfies(e -> assertThat(((DeviceOutOfMemoryException) e).requestedBytes()).isEqualTo(2 * MiB));
        assertThat(limited.reservedBytes()).isEqualTo(MiB);
        assertThat(chain.top.counts().liveBlocks()).isZero();
        limited.deallocate(elsewhere, NothingInFlight.FUTURE);

        assertThatThrownBy(() -> allocation.batch(chain, new long[] {MiB, 8 * MiB})).as("above the cap: no free could make room")
                .isInstanceOf(AllocationAboveLimitException.class).hasMessageStartingWith("buffer 2 of a batch of 2");
        assertThat(limited.reservedBytes()).isZero();
        assertThat(events.failures).as("each failed allocation is told").hasSize(2);
        chain.close();
    }

    @Test
    void aBatchThatFailsOtherwiseGivesBackWhatItTookAndFailsAsItDid() {
        BackendResource upstream = backendResource(64 * MiB);
        Adaptor adaptor = new Adaptor(upstream);
        adaptor.failAtAllocation = 3;
        LocationChain chain = chain(adaptor, null, upstream, LocationChain.Adaptors.COMPOSED);

        assertThatThrownBy(() -> allocation.batch(chain, new long[] {MiB, MiB, MiB})).isExactlyInstanceOf(IllegalStateException.class)
                .hasMessage("the adaptor failed");

        assertThat(adaptor.givenBack).hasSize(2);
        assertThat(upstream.reservedBytes()).isZero();
    }

    @Test
    void aBatchTheApplicationsAdaptorPlacedIsCheckedAndAllOfItGoesBackIfOneIsWrong() {
        BackendResource upstream = backendResource(64 * MiB);
        Adaptor adaptor = new Adaptor(upstream);
        LocationChain composed = chain(adaptor, null, upstream, LocationChain.Adaptors.COMPOSED);
        Block first = upstream.allocate(MiB);
        Block second = upstream.allocate(MiB);

        adaptor.placed = List.of(first);
        assertThatThrownBy(() -> allocation.batch(composed, new long[] {MiB, MiB})).isInstanceOf(IllegalStateException.class)
                .hasMessage("a resource adaptor of the DEVICE chain placed 1 blocks for a batch of 2");
        assertThat(adaptor.givenBack).containsExactly(first);

        adaptor.givenBack.clear();
        first = upstream.allocate(MiB);
        Block wrong = new Lying(second.segment(), 0, 512, MiB);
        adaptor.placed = List.of(first, wrong);
        assertThatThrownBy(() -> allocation.batch(composed, new long[] {MiB, MiB})).isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("a block of 512 bytes");
        assertThat(adaptor.givenBack).containsExactlyInAnyOrder(first, wrong);

        adaptor.placed = null;
        assertThat(allocation.batch(composed, new long[] {MiB, MiB})).as("placed nowhere: one by one").hasSize(2);
    }
}
