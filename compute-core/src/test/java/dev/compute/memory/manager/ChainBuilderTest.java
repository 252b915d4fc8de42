package dev.compute.memory.manager;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.AllocationAboveLimitException;
import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.InvalidSettingException;
import dev.compute.memory.ManagerSettings;
import dev.compute.memory.MemoryEventListener;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.OutOfMemoryHandler;
import dev.compute.memory.ResolvedSettings;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.UnifiedMemoryManagerBuilder;
import dev.compute.memory.recording.AllocationRecorder;
import dev.compute.memory.recording.RecordingResource;
import dev.compute.memory.resource.LimitingResource;
import dev.compute.memory.resource.ResourceAdaptor;
import dev.compute.memory.resource.StatisticsResource;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import dev.compute.memory.spi.BackendSettings;
import dev.compute.memory.testing.ControlledBackend;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.UnaryOperator;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.Test;

/**
 * How a manager's chains are built from its settings: one per location the backend offers (PINNED only with pinning
 * on), each in its order top-down (recording, statistics, the application's handlers, compaction on out-of-memory,
 * the application's adaptors, the pool, the backend's resource under its cap), warmed up, and everything built closed
 * again when a later step fails.
 */
class ChainBuilderTest {

    private static final long MiB = 1L << 20;

    private final SimulatedDiscreteBackend device = new SimulatedDiscreteBackend(64 * MiB);
    private final ControlledBackend backend = new ControlledBackend(device);
    private final CallGate gate = new CallGate();
    private final LocationChains chains = new LocationChains(backend, gate);
    private final AtomicInteger compactions = new AtomicInteger();
    private final OutOfMemoryHandler compaction = (location, bytes, attempt, failure) -> {
        compactions.incrementAndGet();
        return false;
    };

    private ManagerSettings settings(UnaryOperator<UnifiedMemoryManagerBuilder> set) {
        return ResolvedSettings.of(set.apply(UnifiedMemoryManager.builder().timelineInterval(Duration.ZERO).trimInterval(Duration.ZERO)),
                backend);
    }

    private void build(UnaryOperator<UnifiedMemoryManagerBuilder> set, List<ResourceAdaptor> adaptors, List<OutOfMemoryHandler> handlers,
                       @Nullable AllocationRecorder recorder) {
        ChainBuilder.build(chains, backend, settings(set), new ManagerExtensions(List.of(), handlers, adaptors), MemoryEventListener.NONE,
                recorder, compaction);
    }

    private void build(UnaryOperator<UnifiedMemoryManagerBuilder> set) {
        build(set, List.of(), List.of(), new AllocationRecorder());
    }

    @Test
    void theBackendGivenIsTheBackendUsedAndAnUnknownOneIsABadSetting() {
        assertThat(ChainBuilder.openBackend("cuda", backend, BackendSettings.ofDevice(0))).isSameAs(backend);
        assertThatThrownBy(() -> ChainBuilder.openBackend("no-such-backend", null, BackendSettings.ofDevice(0)))
                .isInstanceOf(InvalidSettingException.class).hasMessageContaining("compute.backend").hasMessageContaining("no-such-backend");
    }

    @Test
    void everyLocationTheBackendOffersGetsAChainAndPinnedOnlyWithPinningOn() {
        backend.refuse(MemoryLocation.UNIFIED, "no managed memory");

        build(set -> set.pinningEnabled(false));

        assertThat(chains.locations()).containsExactly(MemoryLocation.DEVICE, MemoryLocation.HOST);
        assertThat(chains.known(MemoryLocation.HOST).hostAccessible()).isTrue();
        assertThat(chains.known(MemoryLocation.DEVICE).hostAccessible()).isFalse();
        chains.closeAll();

        LocationChains withPinning = new LocationChains(backend, gate);
        ChainBuilder.build(withPinning, backend, settings(set -> set), new ManagerExtensions(List.of(), List.of(), List.of()),
                MemoryEventListener.NONE, null, compaction);
        assertThat(withPinning.locations()).containsExactly(MemoryLocation.DEVICE, MemoryLocation.HOST, MemoryLocation.PINNED);
        withPinning.closeAll();
    }

    @Test
    void aChainRecordsThenCountsThenPoolsAndEndsInTheBackendsResource() {
        build(set -> set);
        LocationChain chain = chains.known(MemoryLocation.DEVICE);

        assertThat(chain.entry).isInstanceOf(RecordingResource.class);
        assertThat(chain.top).isInstanceOf(StatisticsResource.class);
        assertThat(chain.pool).isNotNull();
        assertThat(chain.holding).isSameAs(chain.pool);
        assertThat(chain.pool.upstream()).isSameAs(chain.backend);
        assertThat(chain.adaptors).isEqualTo(LocationChain.Adaptors.NONE);
        assertThat(chain.entry.allocate(MiB)).isNotNull();
        assertThat(chain.top.counts().allocations()).as("the entry leads to the statistics").isEqualTo(1);
        chains.closeAll();
    }

    @Test
    void withoutRecordingTheStatisticsAreTheEntryAndWithoutPoolingTheBackendHoldsTheMemory() {
        build(set -> set.poolingEnabled(false), List.of(), List.of(), null);
        LocationChain chain = chains.known(MemoryLocation.DEVICE);

        assertThat(chain.entry).isSameAs(chain.top);
        assertThat(chain.pool).isNull();
        assertThat(chain.holding).isSameAs(chain.backend);
        chains.closeAll();
    }

    @Test
    void compactionOnOutOfMemoryRunsOnceWhereThereIsAPoolAndNoAdaptorOfTheApplications() {
        build(set -> set);
        assertThatThrownBy(() -> chains.open(MemoryLocation.DEVICE).entry.allocate(128 * MiB)).isInstanceOf(DeviceOutOfMemoryException.class);
        assertThat(compactions).as("one try").hasValue(1);
        chains.closeAll();

        LocationChains off = new LocationChains(backend, gate);
        ChainBuilder.build(off, backend, settings(set -> set.compactOnOutOfMemory(false)), new ManagerExtensions(List.of(), List.of(), List.of()),
                MemoryEventListener.NONE, null, compaction);
        assertThatThrownBy(() -> off.open(MemoryLocation.DEVICE).entry.allocate(128 * MiB)).isInstanceOf(DeviceOutOfMemoryException.class);
        off.closeAll();

        LocationChains composed = new LocationChains(backend, gate);
        ResourceAdaptor passThrough = (upstream, location) -> new LimitingResource(upstream, location, Long.MAX_VALUE, "no limit");
        ChainBuilder.build(composed, backend, settings(set -> set), new ManagerExtensions(List.of(), List.of(), List.of(passThrough)),
                MemoryEventListener.NONE, null, compaction);
        assertThat(composed.known(MemoryLocation.DEVICE).adaptors).isEqualTo(LocationChain.Adaptors.COMPOSED);
        assertThatThrownBy(() -> composed.open(MemoryLocation.DEVICE).entry.allocate(128 * MiB)).isInstanceOf(DeviceOutOfMemoryException.class);
        composed.closeAll();

        assertThat(compactions).as("neither without the setting nor with the application's adaptors").hasValue(1);
    }

    @Test
    void theApplicationsHandlersAreAskedOutsideTheCompactionUpToTheRetries() {
        AtomicInteger asked = new AtomicInteger();
        OutOfMemoryHandler evicts = (location, bytes, attempt, failure) -> {
            assertThat(attempt).isEqualTo(asked.incrementAndGet());
            return true;
        };

        build(set -> set.outOfMemoryRetries(2), List.of(), List.of(evicts), null);

        assertThatThrownBy(() -> chains.open(MemoryLocation.DEVICE).entry.allocate(128 * MiB)).isInstanceOf(DeviceOutOfMemoryException.class);
        assertThat(asked).hasValue(2);
        assertThat(compactions).as("a compaction before the handlers, and again on each retry").hasValue(3);
        chains.closeAll();
    }

    @Test
    void eachLocationHasItsOwnCapNamedByItsProperty() {
        build(set -> set.maxPoolSize(32 * MiB).maxPinnedSize(16 * MiB));

        assertThatThrownBy(() -> chains.open(MemoryLocation.DEVICE).entry.allocate(40 * MiB)).isInstanceOf(AllocationAboveLimitException.class)
                .hasMessageContaining("compute.memory.pooling.max-pool-size (" + 32 * MiB + " bytes)");
        assertThatThrownBy(() -> chains.open(MemoryLocation.PINNED).entry.allocate(20 * MiB)).isInstanceOf(AllocationAboveLimitException.class)
                .hasMessageContaining("compute.memory.pinning.max-pinned-size (" + 16 * MiB + " bytes)");
        chains.closeAll();
    }

    @Test
    void anAdaptorThatReturnsNoResourceIsRefusedNamingIt() {
        ResourceAdaptor broken = new ResourceAdaptor() {
            @Override
            public dev.compute.memory.resource.MemoryResource wrap(dev.compute.memory.resource.MemoryResource upstream, MemoryLocation location) {
                return null;
            }

            @Override
            public String toString() {
                return "the broken adaptor";
            }
        };

        assertThatThrownBy(() -> build(set -> set, List.of(broken), List.of(), null)).isInstanceOf(IllegalStateException.class)
                .hasMessage("the resource adaptor the broken adaptor returned no resource for DEVICE: it must return one that wraps the"
                        + " upstream it was given");
    }

    @Test
    void theWarmUpStaysCachedInThePoolAndIsNoAllocation() {
        build(set -> set.warmup(MemoryLocation.DEVICE, 4 * MiB, 2).releaseThreshold(32 * MiB));
        LocationChain chain = chains.known(MemoryLocation.DEVICE);

        assertThat(chain.pool.reservedBytes()).isGreaterThanOrEqualTo(8 * MiB);
        assertThat(chain.top.counts().allocations()).isZero();
        assertThat(chain.pool.poolHits() + chain.pool.poolMisses()).as("nor a pool request: no caller made it").isZero();
        assertThat(chain.backend.backendAllocations()).as("its segments").isPositive();
        chains.closeAll();
    }

    @Test
    void whenALaterStepFailsEverythingBuiltIsClosedAgain() {
        backend.refuse(MemoryLocation.UNIFIED, "no managed memory");
        device.allocate(MemoryLocation.DEVICE, 1); // the backend's own, to tell apart from the chains'
        int before = device.liveAllocations();

        assertThatThrownBy(() -> build(set -> set.warmup(MemoryLocation.DEVICE, 4 * MiB, 1).warmup(MemoryLocation.UNIFIED, MiB, 1)
                .releaseThreshold(32 * MiB)))
                .isInstanceOf(InvalidSettingException.class).hasMessageContaining("compute.memory.pooling.warmup.unified")
                .hasMessageContaining("a warm-up of a location this backend (simulated) offers");

        assertThat(device.liveAllocations()).as("the DEVICE warm-up was freed with its chain").isEqualTo(before);
        assertThatThrownBy(() -> chains.known(MemoryLocation.DEVICE).entry.allocate(MiB)).isInstanceOf(IllegalStateException.class);

        LocationChains noPinned = new LocationChains(backend, gate);
        assertThatThrownBy(() -> ChainBuilder.build(noPinned, backend, ResolvedSettings.of(UnifiedMemoryManager.builder()
                        .timelineInterval(Duration.ZERO).pinningEnabled(false), backend, MemoryLocation.PINNED),
                new ManagerExtensions(List.of(), List.of(), List.of()), MemoryEventListener.NONE, null, compaction))
                .isInstanceOf(InvalidSettingException.class).hasMessageContaining("compute.memory.default-location")
                .hasMessageContaining("a location this backend (simulated) offers: auto or one of [DEVICE, HOST]");
        assertThatThrownBy(() -> noPinned.known(MemoryLocation.HOST).entry.allocate(MiB)).isInstanceOf(IllegalStateException.class);
    }
}
