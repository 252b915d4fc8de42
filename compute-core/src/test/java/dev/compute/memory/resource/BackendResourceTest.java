package dev.compute.memory.resource;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.MemoryEventListener;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.OutOfMemoryReason;
import dev.compute.memory.spi.ComputeBackend;
import dev.compute.memory.spi.NativeAllocation;
import dev.compute.memory.testing.AddressSpaceBackend;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

class BackendResourceTest extends MemoryResourceContract {

    @Override
    protected MemoryResource create(BackendResource upstream) {
        return upstream;
    }

    /** Records what the resource tells its listener. */
    private static final class Recorder implements MemoryEventListener {
        final List<String> events = new ArrayList<>();

        @Override
        public void backendAllocated(MemoryLocation location, long bytes, long nanos) {
            assertThat(nanos).isNotNegative();
            events.add("allocated " + bytes);
        }

        @Override
        public void backendFreed(MemoryLocation location, long bytes, long nanos) {
            events.add("freed " + bytes);
        }
    }

    @Test
    void aFreeTheBackendRefusesKeepsTheAllocationLiveAndTheCloseFreesTheOthers() {
        AtomicLong refusedSize = new AtomicLong();
        ComputeBackend refusing = (ComputeBackend) Proxy.newProxyInstance(ComputeBackend.class.getClassLoader(),
                new Class<?>[] {ComputeBackend.class}, (proxy, method, args) -> {
                    if (method.getName().equals("free") && ((NativeAllocation) args[0]).sizeBytes() == refusedSize.get()) {
                        throw new IllegalStateException("the driver refuses this free"); // and frees nothing
                    }
                    try {
                        return method.invoke(backend, args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
        BackendResource upstream = new BackendResource(refusing, MemoryLocation.DEVICE, 64 * MiB, "compute.memory.pooling.max-pool-size",
                Duration.ofSeconds(1), MemoryEventListener.NONE);
        Block refused = upstream.allocate(4 * MiB);
        upstream.allocate(2 * MiB);
        upstream.allocate(6 * MiB);
        refusedSize.set(4 * MiB);

        assertThatThrownBy(() -> upstream.deallocate(refused)).hasMessage("the driver refuses this free");
        assertThat(upstream.reservedBytes()).as("not freed: still reserved").isEqualTo(12 * MiB);

        assertThatThrownBy(upstream::close).hasMessage("the driver refuses this free");
        assertThat(backend.liveAllocations()).as("only the refused one is left").isEqualTo(1);
        refusedSize.set(0);
        backend.free(refused.segment());
    }

    @Test
    void theLimitRefusesWithItsPropertyAndTheDevicesFreeMemory() {
        BackendResource upstream = new BackendResource(backend, MemoryLocation.DEVICE, 10 * MiB, "compute.memory.pooling.max-pool-size",
                Duration.ofSeconds(1), MemoryEventListener.NONE);
        Block kept = upstream.allocate(6 * MiB);

        assertThatThrownBy(() -> upstream.allocate(6 * MiB)).isInstanceOfSatisfying(DeviceOutOfMemoryException.class,
                        e -> assertThat(e.reason()).isEqualTo(OutOfMemoryReason.POOL_LIMIT))
                .hasMessageContaining("would take the " + 6 * MiB + " bytes reserved past compute.memory.pooling.max-pool-size (" + 10 * MiB + " bytes)")
                .hasMessageContaining("device free");
        assertThatThrownBy(() -> upstream.allocate(11 * MiB)).isInstanceOfSatisfying(DeviceOutOfMemoryException.class,
                        e -> assertThat(e.reason()).isEqualTo(OutOfMemoryReason.POOL_LIMIT))
                .hasMessageContaining("the most this location may ever hold");
        assertThat(upstream.reservedBytes()).isEqualTo(6 * MiB);
        upstream.deallocate(kept);
        upstream.close();
    }

    @Test
    void aDeviceWithoutMemoryRefusesAsDeviceMemory() {
        AddressSpaceBackend small = new AddressSpaceBackend(8 * MiB, AddressSpaceBackend.DEFAULT_GRANULARITY, false);
        BackendResource upstream = new BackendResource(small, MemoryLocation.DEVICE, LIMIT, "limit", Duration.ofSeconds(1), MemoryEventListener.NONE);

        assertThatThrownBy(() -> upstream.allocate(16 * MiB)).isInstanceOfSatisfying(DeviceOutOfMemoryException.class,
                e -> assertThat(e.reason()).isEqualTo(OutOfMemoryReason.DEVICE_MEMORY)).hasMessageContaining("refused by the backend");
        assertThat(upstream.reservedBytes()).isZero();
        upstream.close();
    }

    @Test
    void everyBackendCallIsCountedAndToldToTheListener() {
        Recorder recorder = new Recorder();
        BackendResource upstream = new BackendResource(backend, MemoryLocation.DEVICE, LIMIT, "limit", Duration.ofSeconds(1), recorder);
        Block a = upstream.allocate(MiB);
        Block b = upstream.allocate(2 * MiB);
        upstream.deallocate(a);

        assertThat(recorder.events).containsExactly("allocated " + MiB, "allocated " + 2 * MiB, "freed " + MiB);
        assertThat(upstream.backendAllocations()).isEqualTo(2);
        assertThat(upstream.backendFrees()).isEqualTo(1);
        assertThat(upstream.reservedBytes()).isEqualTo(2 * MiB);
        assertThat(upstream.reservedBytesPeak()).isEqualTo(3 * MiB);
        assertThat(upstream.segmentCount()).isEqualTo(1);
        upstream.deallocate(b);
        upstream.close();
    }

    @Test
    void anAllocationFreedUnderDeviceWorkGoesBackWhenTheWorkCompletes() {
        BackendResource upstream = new BackendResource(backend, MemoryLocation.DEVICE, LIMIT, "limit", Duration.ofSeconds(1), MemoryEventListener.NONE);
        CompletableFuture<Void> kernel = new CompletableFuture<>();
        upstream.deallocate(upstream.allocate(MiB), kernel);
        assertThat(upstream.reservedBytes()).as("still under the kernel").isEqualTo(MiB);
        assertThat(upstream.segments()).singleElement().satisfies(segment -> assertThat(segment.blocks().getFirst().state())
                .isEqualTo(dev.compute.memory.MemorySnapshot.BlockState.PENDING));

        kernel.complete(null);

        assertThat(upstream.reservedBytes()).isZero();
        assertThat(backend.liveAllocations()).isZero();
        upstream.close();
    }

    @Test
    void closeKeepsMemoryWhoseDeviceWorkNeverFinishes() {
        BackendResource upstream = new BackendResource(backend, MemoryLocation.DEVICE, LIMIT, "limit", Duration.ofMillis(100), MemoryEventListener.NONE);
        upstream.deallocate(upstream.allocate(MiB), new CompletableFuture<>());
        upstream.allocate(MiB);

        upstream.close();

        assertThat(backend.liveAllocations()).as("nothing freed under the stuck work").isEqualTo(2);
        assertThatThrownBy(() -> upstream.allocate(1)).isInstanceOf(IllegalStateException.class);
    }
}
