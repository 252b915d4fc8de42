package dev.compute.memory.manager;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.MemoryEventListener;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemoryTimeline;
import dev.compute.memory.resource.BackendResource;
import dev.compute.memory.resource.Block;
import dev.compute.memory.resource.MemoryResource;
import dev.compute.memory.resource.PoolSettings;
import dev.compute.memory.resource.StatisticsResource;
import dev.compute.memory.resource.pool.CachingPoolResource;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import dev.compute.memory.testing.LogCapture;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.logging.Level;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.Test;

/**
 * One location's chain as the manager holds it: which blocks may move and which are checked, trims counted and told,
 * frees that return what the chain threw instead of throwing it, and a close that frees the pool's memory even when an
 * adaptor on top fails to close. Chains are put together here by hand over the simulated device.
 */
class LocationChainTest {

    private static final long MiB = 1L << 20;
    private static final MemoryLocation DEVICE = MemoryLocation.DEVICE;

    private final SimulatedDiscreteBackend device = new SimulatedDiscreteBackend();
    private final ManagerParts.Events events = new ManagerParts.Events();
    private final BackendResource upstream = new BackendResource(device, DEVICE, 256 * MiB, "compute.memory.pooling.max-pool-size",
            Duration.ofSeconds(5), MemoryEventListener.NONE);
    private final CachingPoolResource pool = new CachingPoolResource(upstream, PoolSettings.plainSegments(), MemoryEventListener.NONE);

    private static LocationChain chain(MemoryResource entry, @Nullable CachingPoolResource pool, BackendResource upstream,
                                       LocationChain.Adaptors adaptors) {
        StatisticsResource top = entry instanceof StatisticsResource statistics ? statistics : new StatisticsResource(entry);
        return new LocationChain(top, top, pool, upstream, new MemoryTimeline(8), false, adaptors);
    }

    private LocationChain pooled(LocationChain.Adaptors adaptors) {
        return chain(pool, pool, upstream, adaptors);
    }

    /** Passes everything to {@code upstream} but what the test makes it throw. */
    private static final class Failing implements MemoryResource {
        final MemoryResource upstream;
        @Nullable RuntimeException onFree;
        @Nullable RuntimeException onClose;

        Failing(MemoryResource upstream) {
            this.upstream = upstream;
        }

        @Override
        public Block allocate(long bytes) {
            return upstream.allocate(bytes);
        }

        @Override
        public void deallocate(Block block, CompletableFuture<?> inFlight) {
            if (onFree != null) {
                throw onFree;
            }
            upstream.deallocate(block, inFlight);
        }

        @Override
        public void close() {
            if (onClose != null) {
                throw onClose; // without closing its upstream
            }
            upstream.close();
        }
    }

    @Test
    void aRequestBelowTheSmallestMovableSizeNeverGetsAMovableBlock() {
        LocationChain plain = pooled(LocationChain.Adaptors.NONE);
        LocationChain composed = pooled(LocationChain.Adaptors.COMPOSED);
        long smallest = plain.pool.smallestMovableBytes();
        for (long bytes : new long[] {1, 512, smallest - 513, smallest - 512, smallest - 2, smallest - 1}) {
            Block block = plain.entry.allocate(bytes);
            assertThat(plain.mayMove(bytes)).as("%d bytes", bytes).isFalse();
            assertThat(plain.movable(block)).as("the block of a %d-byte request (%d bytes)", bytes, block.size()).isFalse();
            plain.entry.deallocate(block);
        }
        for (long bytes : new long[] {smallest, smallest + 1, 4 * MiB}) {
            Block block = plain.entry.allocate(bytes);
            assertThat(plain.mayMove(bytes)).as("%d bytes", bytes).isTrue();
            assertThat(plain.movable(block)).as("the block of a %d-byte request", bytes).isTrue();
            plain.entry.deallocate(block);
        }
        assertThat(composed.mayMove(4 * MiB)).as("nothing moves where the application's adaptors are").isFalse();
        plain.close();
        composed.close();
    }

    @Test
    void onlyThePoolsLargeBlocksMoveAndOnlyWithoutTheApplicationsAdaptors() {
        LocationChain plain = pooled(LocationChain.Adaptors.NONE);
        LocationChain composed = pooled(LocationChain.Adaptors.COMPOSED);
        LocationChain unpooled = chain(upstream, null, upstream, LocationChain.Adaptors.NONE);
        Block large = plain.entry.allocate(4 * MiB);
        Block small = plain.entry.allocate(4096);
        Block whole = unpooled.entry.allocate(4 * MiB);

        assertThat(plain.movable(large)).isTrue();
        assertThat(plain.movable(small)).as("small blocks stay on the fast path").isFalse();
        assertThat(composed.movable(large)).as("an adaptor may key blocks by place").isFalse();
        assertThat(unpooled.movable(whole)).as("no pool to move it in").isFalse();
        assertThat(plain.checksBlocks()).isFalse();
        assertThat(composed.checksBlocks()).isTrue();
        assertThat(plain.location()).isEqualTo(DEVICE);
        assertThat(plain.largestPossibleBytes()).isEqualTo(256 * MiB);
        assertThat(plain.holding).isSameAs(pool);
        assertThat(unpooled.holding).as("the backend's resource holds memory without a pool").isSameAs(upstream);
        plain.entry.deallocate(large);
        plain.entry.deallocate(small);
        unpooled.entry.deallocate(whole);
        plain.close();
    }

    @Test
    void everyTrimIsCountedAndOnlyOneThatGaveMemoryBackIsTold() {
        LocationChain chain = pooled(LocationChain.Adaptors.NONE);
        chain.entry.deallocate(chain.entry.allocate(4 * MiB));

        long released = chain.trim(0, events);
        long again = chain.trim(0, events);

        assertThat(released).isPositive();
        assertThat(again).isZero();
        assertThat(chain.trims()).isEqualTo(2);
        assertThat(events.trims).containsExactly(new ManagerParts.Events.Trim(DEVICE, released));
        assertThat(upstream.reservedBytes()).isZero();
        chain.close();
    }

    @Test
    void aFreeReturnsWhatTheChainThrewAddingItToAnEarlierFailure() {
        Failing failing = new Failing(pool);
        LocationChain chain = chain(failing, pool, upstream, LocationChain.Adaptors.COMPOSED);
        Block first = chain.entry.allocate(4096);
        Block second = chain.entry.allocate(4096);
        IllegalStateException refused = new IllegalStateException("the adaptor refused");
        failing.onFree = refused;

        Throwable alone = chain.deallocate(first, CompletableFuture.completedFuture(null), null);
        IllegalArgumentException earlier = new IllegalArgumentException("an earlier failure");
        Throwable added = chain.deallocate(second, CompletableFuture.completedFuture(null), earlier);

        assertThat(alone).isSameAs(refused);
        assertThat(added).isSameAs(earlier);
        assertThat(earlier.getSuppressed()).containsExactly(refused);
        // a free the adaptor refused still counts as done: the buffer is closed, and its caller cannot free it again
        assertThat(chain.top.counts().liveBlocks()).isZero();
        chain.close();
    }

    @Test
    void closeFreesThePoolsMemoryEvenWhenAnAdaptorOnTopFailsToClose() {
        Failing failing = new Failing(pool);
        failing.onClose = new IllegalStateException("the adaptor could not close");
        LocationChain chain = chain(failing, pool, upstream, LocationChain.Adaptors.COMPOSED);
        chain.entry.allocate(4 * MiB); // left live, as buffers a close outlives
        assertThat(device.liveAllocations()).isEqualTo(1);

        try (LogCapture log = LogCapture.managerLog()) {
            chain.close();
            chain.close();

            assertThat(device.liveAllocations()).isZero();
            assertThat(log.atLeast(Level.SEVERE)).isNotEmpty().allSatisfy(record -> {
                assertThat(record.getMessage()).isEqualTo("closing the DEVICE resource chain failed");
                assertThat(record.getThrown()).hasMessage("the adaptor could not close");
            });
        }
    }

    @Test
    void aChainWithoutAPoolClosesTheBackendsResource() {
        BackendResource alone = new BackendResource(device, MemoryLocation.HOST, 64 * MiB, "limit", Duration.ofSeconds(5),
                MemoryEventListener.NONE);
        LocationChain chain = chain(alone, null, alone, LocationChain.Adaptors.NONE);
        chain.entry.allocate(MiB);

        chain.close();

        assertThat(device.liveAllocations()).isZero();
    }
}
