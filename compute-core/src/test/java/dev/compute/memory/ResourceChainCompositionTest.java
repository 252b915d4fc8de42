package dev.compute.memory;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.resource.Block;
import dev.compute.memory.resource.LimitingResource;
import dev.compute.memory.resource.MemoryResource;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;

/** What an application composes into a manager's chains through the builder: adaptors, out-of-memory handlers, listeners. */
class ResourceChainCompositionTest {

    private static final long MiB = 1L << 20;

    /** Records the events a manager tells, as text. */
    private static final class Recorder implements MemoryEventListener {
        final List<String> events = new CopyOnWriteArrayList<>();

        @Override
        public void backendAllocated(MemoryLocation location, long bytes, long nanos) {
            events.add("backend allocated " + location);
        }

        @Override
        public void backendFreed(MemoryLocation location, long bytes, long nanos) {
            events.add("backend freed " + location);
        }

        @Override
        public void outOfMemoryRecovery(MemoryLocation location, long requestedBytes, RecoveryOutcome outcome, long nanos) {
            events.add((outcome == RecoveryOutcome.RECOVERED ? "recovered " : "not recovered ") + requestedBytes);
        }

        @Override
        public void allocationFailed(MemoryLocation location, long requestedBytes, OutOfMemoryReason reason) {
            events.add("failed " + requestedBytes + " " + reason);
        }

        @Override
        public void trimmed(MemoryLocation location, long releasedBytes) {
            events.add("trimmed " + location);
        }
    }

    private static UnifiedMemoryManagerBuilder builder() {
        return UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend()).timelineInterval(Duration.ZERO)
                .trimInterval(Duration.ZERO).maxPoolSize(64 * MiB);
    }

    @Test
    void aBudgetComposedByTheApplicationRefusesAsAnAdaptorLimitAndIsCounted() {
        Recorder recorder = new Recorder();
        try (UnifiedMemoryManager manager = builder().eventListener(recorder)
                .resourceAdaptor((upstream, location) -> new LimitingResource(upstream, location, 4 * MiB, "tenant budget of " + location))
                .build()) {
            UnifiedBuffer kept = manager.allocate(3 * MiB, MemoryLocation.DEVICE);

            assertThatThrownBy(() -> manager.allocate(2 * MiB, MemoryLocation.DEVICE))
                    .isInstanceOfSatisfying(DeviceOutOfMemoryException.class, e -> assertThat(e.reason()).isEqualTo(OutOfMemoryReason.ADAPTOR_LIMIT))
                    .hasMessageContaining("tenant budget of DEVICE");
            assertThat(recorder.events).contains("failed " + 2 * MiB + " ADAPTOR_LIMIT");
            assertThat(manager.statistics(MemoryLocation.DEVICE).liveBuffers()).isEqualTo(1);
            kept.close();
            manager.allocate(2 * MiB, MemoryLocation.DEVICE).close();
        }
    }

    @Test
    void anOutOfMemoryHandlerThatEvictsTheApplicationsCacheLetsTheAllocationThrough() {
        Deque<UnifiedBuffer> cache = new ArrayDeque<>();
        List<Integer> attempts = new ArrayList<>();
        Recorder recorder = new Recorder();
        try (UnifiedMemoryManager manager = builder().eventListener(recorder).outOfMemoryHandler((location, bytes, attempt, failure) -> {
            attempts.add(attempt);
            if (cache.isEmpty()) {
                return false;
            }
            cache.pop().close();
            cache.pop().close();
            return true;
        }).build()) {
            for (int i = 0; i < 6; i++) {
                cache.push(manager.allocate(10 * MiB, MemoryLocation.DEVICE)); // 60 of the 64 MiB
            }

            try (UnifiedBuffer big = manager.allocate(30 * MiB, MemoryLocation.DEVICE)) {
                assertThat(big.byteSize()).isEqualTo(30 * MiB);
            }

            assertThat(attempts).as("20 MiB evicted a round: 30 MiB need two").containsExactly(1, 2);
            assertThat(recorder.events).contains("recovered " + 30 * MiB).doesNotContain("failed " + 30 * MiB + " POOL_LIMIT");
            cache.forEach(UnifiedBuffer::close);
        }
    }

    @Test
    void whenNoHandlerCanHelpTheFailureIsCountedWithItsReason() {
        Recorder recorder = new Recorder();
        try (UnifiedMemoryManager manager = builder().eventListener(recorder).outOfMemoryHandler((location, bytes, attempt, failure) -> false)
                .build()) {
            UnifiedBuffer most = manager.allocate(60 * MiB, MemoryLocation.DEVICE);
            assertThatThrownBy(() -> manager.allocate(8 * MiB, MemoryLocation.DEVICE))
                    .isInstanceOfSatisfying(DeviceOutOfMemoryException.class, e -> assertThat(e.reason()).isEqualTo(OutOfMemoryReason.POOL_LIMIT));
            assertThat(recorder.events).contains("failed " + 8 * MiB + " POOL_LIMIT");
            most.close();
        }
    }

    @Test
    void aRequestAboveTheCapNeitherAsksTheHandlersNorTouchesTheCache() {
        List<Integer> attempts = new ArrayList<>();
        try (UnifiedMemoryManager manager = builder().outOfMemoryHandler((location, bytes, attempt, failure) -> attempts.add(attempt))
                .build()) {
            manager.allocate(8 * MiB, MemoryLocation.DEVICE).close();
            MemoryStatistics before = manager.statistics(MemoryLocation.DEVICE);

            assertThatThrownBy(() -> manager.allocate(65 * MiB, MemoryLocation.DEVICE)).isInstanceOf(AllocationAboveLimitException.class)
                    .hasMessageContaining("above compute.memory.pooling.max-pool-size");

            assertThat(attempts).as("the application's cache is not evicted for a request that can never fit").isEmpty();
            MemoryStatistics after = manager.statistics(MemoryLocation.DEVICE);
            assertThat(after.cachedBytes()).isEqualTo(before.cachedBytes()).isPositive();
            assertThat(after.backendFrees()).isEqualTo(before.backendFrees());
        }
    }

    @Test
    void theListenerHearsOfBackendCallsAndTrimsButNotOfPoolHits() {
        Recorder recorder = new Recorder();
        try (UnifiedMemoryManager manager = builder().eventListener(recorder).build()) {
            manager.allocate(4096, MemoryLocation.DEVICE).close();
            int afterMiss = recorder.events.size();
            assertThat(recorder.events).contains("backend allocated DEVICE");

            for (int i = 0; i < 100; i++) {
                manager.allocate(4096, MemoryLocation.DEVICE).close();
            }
            assertThat(recorder.events).as("pool hits tell nothing").hasSize(afterMiss);

            manager.releaseCachedMemory();
            assertThat(recorder.events).contains("backend freed DEVICE", "trimmed DEVICE");
        }
    }

    @Test
    void aListenerThatThrowsDoesNotBreakAllocation() {
        MemoryEventListener broken = new MemoryEventListener() {
            @Override
            public void backendAllocated(MemoryLocation location, long bytes, long nanos) {
                throw new IllegalStateException("meter registry gone");
            }
        };
        try (UnifiedMemoryManager manager = builder().eventListener(broken).build()) {
            manager.allocate(4096, MemoryLocation.DEVICE).close();
            assertThat(manager.statistics(MemoryLocation.DEVICE).allocations()).isEqualTo(1);
        }
    }

    @Test
    void theSettingsAreReadableAsResolvedAtStart() {
        try (UnifiedMemoryManager manager = builder().maxPoolSize(128 * MiB).outOfMemoryRetries(5).build()) {
            ManagerSettings settings = manager.settings();
            assertThat(settings.maxPoolSize()).isEqualTo(128 * MiB);
            assertThat(settings.releaseThreshold()).as("the default threshold fits under the cap").isEqualTo(128 * MiB);
            assertThat(settings.defaultLocation()).isEqualTo(manager.defaultLocation());
            assertThat(settings.backend()).isEqualTo(manager.backendInfo().backend());
            assertThat(settings.outOfMemoryRetries()).isEqualTo(5);
            assertThat(settings.capOf(MemoryLocation.PINNED)).isEqualTo(settings.maxPinnedSize());
        }
    }

    @Test
    void aRetryCountOutOfRangeFailsAtStartNamingTheProperty() {
        assertThatThrownBy(() -> builder().outOfMemoryRetries(-1).build()).isInstanceOf(InvalidSettingException.class)
                .hasMessageContaining("compute.memory.out-of-memory-retries");
        assertThatThrownBy(() -> builder().outOfMemoryRetries(101).build()).isInstanceOf(InvalidSettingException.class);
    }

    /** An application's adaptor that passes everything through and closes as {@code onClose} says. */
    private static class PassThrough implements MemoryResource {
        private final MemoryResource upstream;
        private final Runnable onClose;

        PassThrough(MemoryResource upstream, Runnable onClose) {
            this.upstream = upstream;
            this.onClose = onClose;
        }

        @Override
        public Block allocate(long bytes) {
            return upstream.allocate(bytes);
        }

        @Override
        public void deallocate(Block block, CompletableFuture<?> inFlight) {
            upstream.deallocate(block, inFlight);
        }

        @Override
        public void close() {
            onClose.run();
        }
    }

    @Test
    void anAdaptorThatReturnsNoResourceStopsTheStartSayingSo() {
        SimulatedDiscreteBackend backend = new SimulatedDiscreteBackend();
        assertThatThrownBy(() -> builder().backend(backend).resourceAdaptor((upstream, location) -> null).build())
                .isInstanceOf(IllegalStateException.class).hasMessageContaining("returned no resource for");
        assertThat(backend.isClosed()).isTrue();
    }

    @Test
    void theManagerFreesThePoolsMemoryWhenAnAdaptorDoesNotCloseItsUpstream() {
        SimulatedDiscreteBackend backend = new SimulatedDiscreteBackend();
        UnifiedMemoryManager manager = builder().backend(backend)
                .resourceAdaptor((upstream, location) -> new PassThrough(upstream, () -> { })).build();
        manager.allocate(4096, MemoryLocation.DEVICE).close();
        UnifiedBuffer leftOpen = manager.allocate(4096, MemoryLocation.DEVICE);

        manager.close();

        assertThat(backend.liveAllocations()).as("every segment given back").isZero();
        MemoryStatistics after = manager.statistics(MemoryLocation.DEVICE);
        assertThat(after.reservedBytes()).isZero();
        assertThat(after.allocatedBytes()).isZero();
        assertThat(after.liveBuffers()).isZero();
        assertThat(leftOpen.isClosed()).isTrue();
    }

    @Test
    void theManagerFreesThePoolsMemoryWhenAnAdaptorThrowsWhileClosing() {
        SimulatedDiscreteBackend backend = new SimulatedDiscreteBackend();
        UnifiedMemoryManager manager = builder().backend(backend).resourceAdaptor((upstream, location) -> new PassThrough(upstream, () -> {
            throw new IllegalStateException("the adaptor's own shutdown failed");
        })).build();
        manager.allocate(4096, MemoryLocation.DEVICE).close();

        manager.close();

        assertThat(backend.liveAllocations()).isZero();
        assertThat(manager.statistics(MemoryLocation.DEVICE).reservedBytes()).isZero();
    }

    @Test
    void anAdaptorWhoseFreeThrowsReachesTheCallerAndTheHostMirrorStillGoesBack() {
        try (UnifiedMemoryManager manager = builder().resourceAdaptor((upstream, location) -> new PassThrough(upstream, upstream::close) {
            @Override
            public void deallocate(Block block, CompletableFuture<?> inFlight) {
                if (location == MemoryLocation.DEVICE) {
                    throw new IllegalStateException("the adaptor's free failed");
                }
                upstream.deallocate(block, inFlight);
            }
        }).build()) {
            MemoryLocation mirrorAt = manager.locations().contains(MemoryLocation.PINNED) ? MemoryLocation.PINNED : MemoryLocation.HOST;
            UnifiedBuffer buffer = manager.allocate(4096, MemoryLocation.DEVICE);
            buffer.hostView(); // the host mirror
            assertThat(manager.statistics(mirrorAt).allocatedBytes()).isEqualTo(4096);

            assertThatThrownBy(buffer::close).isInstanceOf(IllegalStateException.class).hasMessage("the adaptor's free failed");

            assertThat(buffer.isClosed()).isTrue();
            assertThat(manager.statistics(mirrorAt).allocatedBytes()).as("the mirror went back").isZero();
        }
    }

    @Test
    void aBlockSmallerThanAskedFromAnAdaptorFailsTheAllocationRatherThanLetABufferWriteOverItsNeighbour() {
        try (UnifiedMemoryManager manager = builder().resourceAdaptor((upstream, location) -> new PassThrough(upstream, upstream::close) {
            @Override
            public Block allocate(long bytes) {
                return upstream.allocate(bytes > 4096 ? bytes / 2 : bytes); // a slab adaptor that miscounts
            }
        }).build(); UnifiedBuffer neighbour = manager.allocate(1024, MemoryLocation.DEVICE)) {
            neighbour.copyFrom(new byte[1024]);

            assertThatThrownBy(() -> manager.allocate(8192, MemoryLocation.DEVICE)).isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("handed out a block of 4096 bytes").hasMessageContaining("for a request of 8192 bytes");

            byte[] read = new byte[1024];
            neighbour.copyTo(read);
            assertThat(read).containsOnly(0);
            MemoryStatistics figures = manager.statistics(MemoryLocation.DEVICE);
            assertThat(figures.liveBuffers()).as("the wrong block went back").isEqualTo(1);
            assertThat(figures.allocatedBytes()).isEqualTo(1024);
        }
    }

    @Test
    void aBatchAnAdaptorPlacesWronglyFailsWithEveryBlockGivenBack() {
        try (UnifiedMemoryManager manager = builder().resourceAdaptor((upstream, location) -> new PassThrough(upstream, upstream::close) {
            @Override
            public List<Block> allocateAdjacent(long[] bytes) {
                return bytes.length == 2 ? List.of(upstream.allocate(bytes[0]), upstream.allocate(bytes[1] / 2)) : List.of(upstream.allocate(bytes[0]));
            }
        }).build()) {
            assertThatThrownBy(() -> manager.allocateBatch(DataType.INT8, new long[] {4096, 8192}, MemoryLocation.DEVICE))
                    .isInstanceOf(IllegalStateException.class).hasMessageContaining("for a request of 8192 bytes");
            assertThatThrownBy(() -> manager.allocateBatch(DataType.INT8, new long[] {4096, 4096, 4096}, MemoryLocation.DEVICE))
                    .isInstanceOf(IllegalStateException.class).hasMessageContaining("placed 1 blocks for a batch of 3");
            MemoryStatistics figures = manager.statistics(MemoryLocation.DEVICE);
            assertThat(figures.liveBuffers()).isZero();
            assertThat(figures.allocatedBytes()).isZero();
        }
    }
}
