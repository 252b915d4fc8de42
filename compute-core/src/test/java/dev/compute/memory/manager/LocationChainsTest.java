package dev.compute.memory.manager;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.MemoryEventListener;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemoryTimeline;
import dev.compute.memory.resource.BackendResource;
import dev.compute.memory.resource.PoolSettings;
import dev.compute.memory.resource.StatisticsResource;
import dev.compute.memory.resource.pool.CachingPoolResource;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import dev.compute.memory.spi.ComputeBackend;
import dev.compute.memory.testing.AddressSpaceBackend;
import dev.compute.memory.testing.ControlledBackend;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The chains of a manager's locations: their order, where mirrors go, which chain an allocation may use (none once the
 * manager is closed, and a message that says why a location is missing), and trims and closes over all of them. Chains
 * are pooled chains over the simulated device, put together by hand.
 */
class LocationChainsTest {

    private static final long MiB = 1L << 20;

    private final SimulatedDiscreteBackend device = new SimulatedDiscreteBackend();
    private final ControlledBackend backend = new ControlledBackend(device);
    private final CallGate gate = new CallGate();
    private final LocationChains chains = new LocationChains(backend, gate);

    private static LocationChain pooled(ComputeBackend backend, MemoryLocation location) {
        BackendResource upstream = new BackendResource(backend, location, 256 * MiB, "limit", Duration.ofSeconds(5), MemoryEventListener.NONE);
        CachingPoolResource pool = new CachingPoolResource(upstream, PoolSettings.plainSegments(), MemoryEventListener.NONE);
        StatisticsResource top = new StatisticsResource(pool);
        return new LocationChain(top, top, pool, upstream, new MemoryTimeline(8), backend.hostAccessible(location), LocationChain.Adaptors.NONE);
    }

    private void add(MemoryLocation... locations) {
        for (MemoryLocation location : locations) {
            chains.add(location, pooled(backend, location));
        }
    }

    private long reserved() {
        return chains.all().stream().mapToLong(chain -> chain.holding.reservedBytes()).sum();
    }

    /** Leaves a cached 4 MiB block in the chain's pool, for a trim to give back. */
    private static void cache(LocationChain chain) {
        chain.entry.deallocate(chain.entry.allocate(4 * MiB));
    }

    @Test
    void locationsKeepTheirOrderAndMirrorsGoToPinnedMemoryWhereThatIsHostMemory() {
        add(MemoryLocation.DEVICE, MemoryLocation.HOST);
        assertThat(chains.locations()).containsExactly(MemoryLocation.DEVICE, MemoryLocation.HOST);
        assertThat(chains.mirrorLocation()).isEqualTo(MemoryLocation.HOST);

        add(MemoryLocation.PINNED);

        assertThat(chains.locations()).containsExactly(MemoryLocation.DEVICE, MemoryLocation.HOST, MemoryLocation.PINNED);
        assertThat(chains.offered()).containsExactlyInAnyOrder(MemoryLocation.DEVICE, MemoryLocation.HOST, MemoryLocation.PINNED);
        assertThat(chains.mirrorLocation()).isEqualTo(MemoryLocation.PINNED);
        assertThat(chains.all()).hasSize(3);

        AddressSpaceBackend noHostMemory = new AddressSpaceBackend(1L << 30);
        LocationChains elsewhere = new LocationChains(noHostMemory, gate);
        elsewhere.add(MemoryLocation.HOST, pooled(noHostMemory, MemoryLocation.HOST));
        elsewhere.add(MemoryLocation.PINNED, pooled(noHostMemory, MemoryLocation.PINNED));
        assertThat(elsewhere.mirrorLocation()).as("PINNED memory the host cannot address").isEqualTo(MemoryLocation.HOST);
        chains.closeAll();
        elsewhere.closeAll();
    }

    @Test
    void aMissingLocationIsRefusedSayingWhyAndWhatIsThere() {
        backend.refuse(MemoryLocation.UNIFIED, "no managed memory on this device");
        add(MemoryLocation.DEVICE, MemoryLocation.HOST);

        assertThatThrownBy(() -> chains.open(MemoryLocation.UNIFIED)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("UNIFIED memory is not available on this manager (simulated): no managed memory on this device;"
                        + " available: [DEVICE, HOST]");
        assertThatThrownBy(() -> chains.open(MemoryLocation.PINNED)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("PINNED memory is not available on this manager (simulated): pinning is disabled"
                        + " (compute.memory.pinning.enabled=false); available: [DEVICE, HOST]");
        assertThatThrownBy(() -> chains.open(null)).isInstanceOf(NullPointerException.class).hasMessage("location");
        assertThatThrownBy(() -> chains.known(MemoryLocation.PINNED)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("PINNED memory is not available on this manager; available: [DEVICE, HOST]");
        assertThat(chains.of(MemoryLocation.PINNED)).isNull();
        assertThat(chains.hostAccessible(MemoryLocation.PINNED)).isFalse();
        assertThat(chains.hostAccessible(MemoryLocation.HOST)).isTrue();
        assertThat(chains.hostAccessible(MemoryLocation.DEVICE)).isFalse();
        chains.closeAll();
    }

    @Test
    void onceTheManagerIsClosedNoChainIsOpenedButItsFiguresStayKnown() {
        add(MemoryLocation.DEVICE);
        LocationChain device = chains.open(MemoryLocation.DEVICE);

        gate.close();

        assertThatThrownBy(() -> chains.open(MemoryLocation.DEVICE)).isInstanceOf(IllegalStateException.class)
                .hasMessage("this UnifiedMemoryManager is closed");
        assertThat(chains.known(MemoryLocation.DEVICE)).isSameAs(device);
        assertThat(chains.of(MemoryLocation.DEVICE)).isSameAs(device);
        chains.closeAll();
    }

    @Test
    void aTrimOfAllLocationsIsOneCallThatAddsUpWhatEachGaveBack() {
        add(MemoryLocation.DEVICE, MemoryLocation.HOST);
        chains.all().forEach(LocationChainsTest::cache);
        List<Boolean> countedIn = new ArrayList<>();
        MemoryEventListener listener = new MemoryEventListener() {
            @Override
            public void trimmed(MemoryLocation location, long releasedBytes) {
                countedIn.add(!gate.awaitCalls(System.nanoTime()));
            }
        };

        long cached = reserved();

        long released = chains.trimAll(0, listener);

        assertThat(cached).isPositive();
        assertThat(released).as("all that each location cached").isEqualTo(cached);
        assertThat(reserved()).isZero();
        assertThat(countedIn).containsExactly(true, true);
        assertThat(gate.awaitCalls(System.nanoTime())).as("counted out").isTrue();
        assertThat(chains.known(MemoryLocation.DEVICE).trims()).isEqualTo(1);
        chains.closeAll();
    }

    @Test
    void aTrimStopsAtTheNextLocationOnceTheManagerIsClosed() {
        add(MemoryLocation.DEVICE, MemoryLocation.HOST);
        chains.all().forEach(LocationChainsTest::cache);
        MemoryEventListener closesTheManager = new MemoryEventListener() {
            @Override
            public void trimmed(MemoryLocation location, long releasedBytes) {
                gate.close();
            }
        };

        long cachedAtDevice = chains.known(MemoryLocation.DEVICE).holding.reservedBytes();

        long released = chains.trimAll(0, closesTheManager);

        assertThat(released).isEqualTo(cachedAtDevice);
        assertThat(chains.known(MemoryLocation.HOST).holding.reservedBytes()).as("not trimmed").isPositive();
        assertThat(chains.known(MemoryLocation.DEVICE).trims()).isEqualTo(1);
        assertThat(chains.known(MemoryLocation.HOST).trims()).isZero();
        chains.closeAll();
    }

    @Test
    void closeAllFreesWhatEveryPoolHolds() {
        add(MemoryLocation.DEVICE, MemoryLocation.HOST, MemoryLocation.PINNED);
        chains.all().forEach(chain -> chain.entry.allocate(MiB));
        assertThat(device.liveAllocations()).isEqualTo(3);

        chains.closeAll();

        assertThat(device.liveAllocations()).isZero();
    }
}
