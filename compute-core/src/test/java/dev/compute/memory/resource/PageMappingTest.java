package dev.compute.memory.resource;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.MemoryEventListener;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.OutOfMemoryReason;
import dev.compute.memory.spi.NativeAllocation;
import dev.compute.memory.testing.AddressSpaceBackend;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The backend's page mapping as a resource lends it to a pool: reserved address space costs nothing, mapped pages count
 * in the resource's reserved bytes and against its limit (refused before the backend is asked), each map and unmap is
 * told to the listener, and the ledger stays exact under threads mapping at once. On the address-space backend, whose
 * books say what was really mapped.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class PageMappingTest {

    private static final long PAGE = AddressSpaceBackend.DEFAULT_GRANULARITY;

    private record Call(String what, long bytes) {}

    private final List<Call> told = new CopyOnWriteArrayList<>();
    private final MemoryEventListener listener = new MemoryEventListener() {
        @Override
        public void backendAllocated(MemoryLocation location, long bytes, long nanos) {
            assertThat(nanos).isNotNegative();
            told.add(new Call("mapped", bytes));
        }

        @Override
        public void backendFreed(MemoryLocation location, long bytes, long nanos) {
            told.add(new Call("unmapped", bytes));
        }
    };
    private final AddressSpaceBackend backend = new AddressSpaceBackend(64 * PAGE);
    private final BackendResource resource = new BackendResource(backend, MemoryLocation.DEVICE, 8 * PAGE,
            "compute.memory.pooling.max-pool-size", Duration.ofSeconds(5), listener);
    private final PageMapping pages = resource.pageMapping();

    @Test
    void reservedAddressSpaceCostsNothingAndMappedPagesCountAsReserved() {
        assertThat(pages.granularity()).isEqualTo(PAGE);

        NativeAllocation range = pages.reserve(32 * PAGE);
        assertThat(resource.reservedBytes()).isZero();
        assertThat(resource.segmentCount()).isEqualTo(1);

        pages.map(range, 0, 2 * PAGE);
        pages.map(range, 4 * PAGE, PAGE);
        assertThat(resource.reservedBytes()).isEqualTo(3 * PAGE).isEqualTo(backend.usedBytes());
        assertThat(resource.backendAllocations()).isEqualTo(2);

        pages.unmap(range, 0, 2 * PAGE);
        assertThat(resource.reservedBytes()).isEqualTo(PAGE);
        assertThat(resource.reservedBytesPeak()).isEqualTo(3 * PAGE);
        assertThat(resource.backendFrees()).isEqualTo(1);
        pages.unmap(range, 4 * PAGE, PAGE);
        pages.release(range);

        assertThat(resource.segmentCount()).isZero();
        assertThat(resource.backendCalls()).as("two maps, two unmaps, a reserve and a release").isEqualTo(6);
        assertThat(told).containsExactly(new Call("mapped", 2 * PAGE), new Call("mapped", PAGE), new Call("unmapped", 2 * PAGE),
                new Call("unmapped", PAGE));
        assertThat(backend.liveAllocations()).isZero();
    }

    @Test
    void aMapPastTheLimitIsRefusedBeforeTheBackendIsAsked() {
        NativeAllocation range = pages.reserve(32 * PAGE);
        pages.map(range, 0, 6 * PAGE);
        long mapCalls = backend.mapCalls();

        assertThatThrownBy(() -> pages.map(range, 6 * PAGE, 3 * PAGE)).isInstanceOfSatisfying(DeviceOutOfMemoryException.class, e -> {
            assertThat(e.reason()).isEqualTo(OutOfMemoryReason.POOL_LIMIT);
            assertThat(e.requestedBytes()).isEqualTo(3 * PAGE);
            assertThat(e).hasMessageContaining("would take the " + 6 * PAGE + " bytes reserved past compute.memory.pooling.max-pool-size");
        });

        assertThat(backend.mapCalls()).isEqualTo(mapCalls);
        assertThat(resource.reservedBytes()).isEqualTo(6 * PAGE);
        pages.map(range, 6 * PAGE, 2 * PAGE);
        assertThat(resource.reservedBytes()).as("up to the limit exactly").isEqualTo(8 * PAGE);
    }

    @Test
    void aMapTheBackendRefusesIsTheDevicesOutOfMemoryAndCountsNothing() {
        AddressSpaceBackend small = new AddressSpaceBackend(2 * PAGE);
        BackendResource generous = new BackendResource(small, MemoryLocation.DEVICE, 8 * PAGE, "limit", Duration.ofSeconds(5), listener);
        PageMapping smallPages = generous.pageMapping();
        NativeAllocation range = smallPages.reserve(8 * PAGE);

        assertThatThrownBy(() -> smallPages.map(range, 0, 4 * PAGE)).isInstanceOfSatisfying(DeviceOutOfMemoryException.class, e -> {
            assertThat(e.reason()).isEqualTo(OutOfMemoryReason.DEVICE_MEMORY);
            assertThat(e).hasMessageContaining("were refused by the backend").hasMessageContaining("address-space device full");
        });

        assertThat(generous.reservedBytes()).isZero();
        assertThat(generous.backendAllocations()).isZero();
        assertThat(told).isEmpty();
    }

    @Test
    void noAddressSpaceIsReservedOnceTheResourceIsClosed() {
        resource.close();

        assertThatThrownBy(() -> pages.reserve(PAGE)).isInstanceOf(IllegalStateException.class)
                .hasMessage("DEVICE memory resource is closed");
        assertThat(backend.reserveCalls()).isZero();
    }

    @Test
    void threadsMappingAtOnceKeepTheLedgerExactAndWithinTheLimit() throws Exception {
        int threads = 4;
        CountDownLatch start = new CountDownLatch(1);
        AtomicReference<Throwable> failure = new AtomicReference<>();
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            workers.add(Thread.ofPlatform().start(() -> {
                try {
                    start.await();
                    NativeAllocation range = pages.reserve(4 * PAGE);
                    for (int i = 0; i < 500; i++) {
                        try {
                            pages.map(range, 0, 3 * PAGE);
                        } catch (DeviceOutOfMemoryException full) {
                            continue; // the others hold the limit for now
                        }
                        assertThat(resource.reservedBytes()).isLessThanOrEqualTo(8 * PAGE);
                        pages.unmap(range, 0, 3 * PAGE);
                    }
                    pages.release(range);
                } catch (Throwable e) {
                    failure.set(e);
                }
            }));
        }
        start.countDown();
        for (Thread worker : workers) {
            worker.join(30_000);
        }

        assertThat(failure.get()).isNull();
        assertThat(resource.reservedBytes()).isZero();
        assertThat(backend.usedBytes()).isZero();
        assertThat(resource.reservedBytesPeak()).isLessThanOrEqualTo(6 * PAGE);
        assertThat(resource.segmentCount()).isZero();
    }

    /** A plain allocation whose free is in the backend still counts in reserved: the segments show it, as RELEASING. */
    @Test
    void aPlainAllocationWhoseFreeIsUnderWayStaysInTheSegmentsAsReservedCountsIt() throws Exception {
        CountDownLatch freeCalled = new CountDownLatch(1);
        CountDownLatch driverReturns = new CountDownLatch(1);
        dev.compute.memory.spi.ComputeBackend slow = (dev.compute.memory.spi.ComputeBackend) java.lang.reflect.Proxy.newProxyInstance(
                getClass().getClassLoader(), new Class<?>[] {dev.compute.memory.spi.ComputeBackend.class}, (proxy, method, args) -> {
                    if (method.getName().equals("free")) {
                        freeCalled.countDown();
                        driverReturns.await();
                    }
                    try {
                        return method.invoke(backend, args);
                    } catch (java.lang.reflect.InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
        BackendResource plain = new BackendResource(slow, MemoryLocation.DEVICE, 8 * PAGE, "limit", Duration.ofSeconds(5), listener);
        Block block = plain.allocate(2 * PAGE);
        Thread freeing = Thread.ofPlatform().start(() -> plain.deallocate(block, java.util.concurrent.CompletableFuture.completedFuture(null)));
        try {
            assertThat(freeCalled.await(30, TimeUnit.SECONDS)).isTrue();
            assertThat(plain.reservedBytes()).isEqualTo(2 * PAGE);
            assertThat(plain.segments()).as("the segments add up with reserved mid-free")
                    .extracting(dev.compute.memory.MemorySnapshot.Segment::sizeBytes).containsExactly(2 * PAGE);
            assertThat(plain.segments().getFirst().blocks().getFirst().state()).isEqualTo(dev.compute.memory.MemorySnapshot.BlockState.RELEASING);
        } finally {
            driverReturns.countDown();
            freeing.join(Duration.ofSeconds(30));
        }
        assertThat(plain.reservedBytes()).isZero();
        assertThat(plain.segments()).isEmpty();
    }
}
