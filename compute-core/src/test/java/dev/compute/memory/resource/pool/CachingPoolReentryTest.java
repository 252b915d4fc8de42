package dev.compute.memory.resource.pool;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.MemoryEventListener;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.resource.BackendResource;
import dev.compute.memory.resource.Block;
import dev.compute.memory.resource.PoolSettings;
import dev.compute.memory.testing.AddressSpaceBackend;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A listener of backend calls is told under the pool's lock, while the pool is mid-change on that thread: what it
 * asks of the same pool must not change the pool under the change.
 */
class CachingPoolReentryTest {

    private static final long MiB = 1L << 20;

    /** A pool whose backend calls are told to {@code onBackendCall}, given the pool. */
    private static CachingPoolResource pool(AddressSpaceBackend backend, boolean expandable, Consumer<CachingPoolResource> onBackendCall) {
        AtomicReference<CachingPoolResource> self = new AtomicReference<>();
        MemoryEventListener listener = new MemoryEventListener() {
            @Override
            public void backendAllocated(MemoryLocation location, long bytes, long nanos) {
                CachingPoolResource pool = self.get();
                if (pool != null) {
                    onBackendCall.accept(pool);
                }
            }

            @Override
            public void backendFreed(MemoryLocation location, long bytes, long nanos) {
                backendAllocated(location, bytes, nanos);
            }
        };
        CachingPoolResource pool = new CachingPoolResource(new BackendResource(backend, MemoryLocation.DEVICE, 1L << 30,
                "compute.memory.pooling.max-pool-size", PoolSettings.DEFAULT_DEVICE_WAIT_TIMEOUT, listener),
                expandable ? PoolSettings.expandable() : PoolSettings.plainSegments(), listener);
        self.set(pool);
        return pool;
    }

    @ParameterizedTest(name = "expandable={0}")
    @ValueSource(booleans = {true, false})
    void anAllocationFromABackendCallsListenerIsRefusedAndThePoolKeepsItsBooks(boolean expandable) {
        AddressSpaceBackend backend = new AddressSpaceBackend(1L << 30);
        List<RuntimeException> refusals = new ArrayList<>();
        CachingPoolResource pool = pool(backend, expandable, self -> {
            try {
                self.allocate(3 * MiB);
            } catch (RuntimeException e) {
                refusals.add(e);
            }
        });
        List<Block> blocks = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            blocks.add(pool.allocate(3 * MiB + i * MiB));
        }

        assertThat(refusals).isNotEmpty().allSatisfy(e -> assertThat(e).isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("DEVICE memory pool: allocation from within a backend call's listener"));
        blocks.forEach(block -> pool.deallocate(block, CompletableFuture.completedFuture(null)));
        pool.trim(0);
        assertThat(pool.reservedBytes()).as("nothing held once all is freed and trimmed").isZero();
        assertThat(backend.usedBytes()).isZero();
        pool.close();
        assertThat(backend.liveAllocations()).isZero();
    }

    @ParameterizedTest(name = "expandable={0}")
    @ValueSource(booleans = {true, false})
    void aTrimFromABackendCallsListenerGivesNothingBackUnderTheChange(boolean expandable) {
        AddressSpaceBackend backend = new AddressSpaceBackend(1L << 30);
        List<Long> released = new ArrayList<>();
        CachingPoolResource pool = pool(backend, expandable, self -> released.add(self.trim(0)));
        List<Block> blocks = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            blocks.add(pool.allocate(3 * MiB + i * MiB));
            if (i % 2 == 1) {
                pool.deallocate(blocks.remove(0), CompletableFuture.completedFuture(null));
            }
        }

        assertThat(released).isNotEmpty().containsOnly(0L);
        blocks.forEach(block -> pool.deallocate(block, CompletableFuture.completedFuture(null)));
        pool.trim(0);
        assertThat(pool.reservedBytes()).isZero();
        assertThat(backend.usedBytes()).isZero();
        pool.close();
        assertThat(backend.liveAllocations()).isZero();
    }
}
