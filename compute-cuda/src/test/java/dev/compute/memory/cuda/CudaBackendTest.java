package dev.compute.memory.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.MemoryLocation;
import dev.compute.memory.spi.BackendOutOfMemoryException;
import dev.compute.memory.spi.BackendSettings;
import dev.compute.memory.spi.NativeAllocation;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The backend's own calls on a real device: allocation per location, copies at odd sizes and offsets, staging. */
class CudaBackendTest {

    private final Random random = new Random(4);
    private CudaBackend backend;
    private final List<NativeAllocation> allocations = new ArrayList<>();

    @BeforeEach
    void open() {
        backend = CudaTestSupport.openBackend(CudaTestSupport.oddStaging());
    }

    @AfterEach
    void close() {
        if (backend != null) {
            allocations.forEach(backend::free);
            backend.close();
        }
    }

    private NativeAllocation allocate(MemoryLocation location, long bytes) {
        NativeAllocation allocation = backend.allocate(location, bytes);
        allocations.add(allocation);
        return allocation;
    }

    private byte[] randomBytes(int n) {
        byte[] bytes = new byte[n];
        random.nextBytes(bytes);
        return bytes;
    }

    @Test
    void describesTheDeviceAndItsMemory() {
        assertThat(backend.info().backend()).isEqualTo("cuda");
        assertThat(backend.info().deviceName()).isNotBlank();
        assertThat(backend.info().deviceTotalBytes()).isPositive();
        assertThat(backend.memoryInfo().totalBytes()).isEqualTo(backend.info().deviceTotalBytes());
        assertThat(backend.memoryInfo().freeBytes()).isBetween(1L, backend.info().deviceTotalBytes());
        assertThat(backend.defaultLocation()).isEqualTo(MemoryLocation.DEVICE);
        assertThat(backend.hostAccessible(MemoryLocation.DEVICE)).isFalse();
        assertThat(backend.hostAccessible(MemoryLocation.PINNED)).isTrue();
        assertThat(backend.virtualMemory(MemoryLocation.DEVICE)).isPresent();
        assertThat(backend.virtualMemory(MemoryLocation.PINNED)).isEmpty();
    }

    @Test
    void hostAccessibleLocationsHaveHostSegmentsAndDeviceHasNone() {
        assertThat(allocate(MemoryLocation.DEVICE, 4096).hostSegment()).isNull();
        for (MemoryLocation location : List.of(MemoryLocation.PINNED, MemoryLocation.UNIFIED, MemoryLocation.HOST)) {
            NativeAllocation allocation = allocate(location, 4096);
            assertThat(allocation.hostSegment()).as("%s", location).isNotNull();
            allocation.hostSegment().fill((byte) 9);
            assertThat(allocation.hostSegment().get(ValueLayout.JAVA_BYTE, 4095)).isEqualTo((byte) 9);
        }
    }

    @Test
    void heapBytesRoundTripAtOddSizesAndOffsetsEverywhere() {
        for (MemoryLocation location : MemoryLocation.values()) {
            NativeAllocation allocation = allocate(location, (3 << 20) + 17);
            for (int size : new int[] {1, 7, 4095, 65_537, (1 << 20) + 3, (2 << 20) + 11}) {
                for (long offset : new long[] {0, 1, 13, 4097}) {
                    byte[] data = randomBytes(size);
                    backend.copyToDevice(MemorySegment.ofArray(data), allocation, offset, size);
                    byte[] back = new byte[size];
                    backend.copyToHost(allocation, offset, MemorySegment.ofArray(back), size);
                    assertThat(back).as("%s, %d bytes at %d", location, size, offset).isEqualTo(data);
                }
            }
        }
    }

    @Test
    void stagedCopiesAreByteExactAtSizesThatAreNotMultiplesOfTheChunk() throws Exception {
        long chunk = CudaTestSupport.ODD_STAGING_BYTES;
        NativeAllocation device = allocate(MemoryLocation.DEVICE, 64L << 20);
        try (Arena arena = Arena.ofShared()) {
            for (long size : new long[] {chunk - 1, chunk, chunk + 1, 2 * chunk + 5, 7 * chunk + 12_345, (37L << 20) + 3}) {
                byte[] data = randomBytes((int) size);
                // from a heap array, synchronously
                backend.copyToDevice(MemorySegment.ofArray(data), device, 3, size);
                byte[] back = new byte[(int) size];
                backend.copyToHost(device, 3, MemorySegment.ofArray(back), size);
                assertThat(back).as("heap, %d bytes", size).isEqualTo(data);
                // from a pageable native segment, asynchronously, into a pageable native segment
                MemorySegment pageable = arena.allocate(size);
                MemorySegment.copy(MemorySegment.ofArray(data), 0, pageable, 0, size);
                backend.copyToDevice(MemorySegment.ofArray(new byte[(int) size]), device, 5, size);
                backend.copyToDeviceAsync(pageable, device, 5, size).get();
                MemorySegment landed = arena.allocate(size);
                backend.copyToHostAsync(device, 5, landed, size).get();
                assertThat(landed.mismatch(pageable)).as("pageable, %d bytes", size).isEqualTo(-1);
            }
        }
    }

    @Test
    void pinnedAndManagedMemoryCopyDirectlyBothWays() throws Exception {
        int size = (5 << 20) + 9;
        byte[] data = randomBytes(size);
        NativeAllocation device = allocate(MemoryLocation.DEVICE, size + 64L);
        for (MemoryLocation location : List.of(MemoryLocation.PINNED, MemoryLocation.UNIFIED)) {
            NativeAllocation host = allocate(location, size + 64L);
            MemorySegment.copy(MemorySegment.ofArray(data), 0, host.hostSegment(), 32, size);
            backend.copyToDeviceAsync(host.hostSegment().asSlice(32, size), device, 64, size).get();
            host.hostSegment().fill((byte) 0);
            backend.copyToHostAsync(device, 64, host.hostSegment().asSlice(1, size), size).get();
            assertThat(host.hostSegment().asSlice(1, size).mismatch(MemorySegment.ofArray(data))).as("%s", location).isEqualTo(-1);
        }
    }

    @Test
    void copiesWithinTheDeviceAtOffsetsBetweenEveryPairOfLocations() {
        int size = 100_003;
        byte[] data = randomBytes(size);
        for (MemoryLocation from : MemoryLocation.values()) {
            for (MemoryLocation to : MemoryLocation.values()) {
                NativeAllocation source = allocate(from, size + 100);
                NativeAllocation target = allocate(to, size + 100);
                backend.copyToDevice(MemorySegment.ofArray(data), source, 7, size);
                backend.copyWithinDevice(source, 7, target, 91, size);
                byte[] back = new byte[size];
                backend.copyToHost(target, 91, MemorySegment.ofArray(back), size);
                assertThat(back).as("%s to %s", from, to).isEqualTo(data);
            }
        }
    }

    @Test
    void anAsyncCopyCompletesOnlyWhenTheBytesHaveLanded() {
        long size = 256L << 20;
        NativeAllocation pinned = allocate(MemoryLocation.PINNED, size);
        NativeAllocation device = allocate(MemoryLocation.DEVICE, size);
        pinned.hostSegment().fill((byte) 0x5a);
        CompletableFuture<Void> in = backend.copyToDeviceAsync(pinned.hostSegment(), device, 0, size);
        in.join();
        pinned.hostSegment().fill((byte) 0);
        CompletableFuture<Void> out = backend.copyToHostAsync(device, 0, pinned.hostSegment(), size);
        out.join();
        for (long i = 0; i < size; i += 4093) {
            assertThat(pinned.hostSegment().get(ValueLayout.JAVA_BYTE, i)).isEqualTo((byte) 0x5a);
        }
        assertThat(pinned.hostSegment().get(ValueLayout.JAVA_BYTE, size - 1)).isEqualTo((byte) 0x5a);
    }

    @Test
    void pinnedAllocationsOfTwoGibibytesAndMoreWork() {
        // JCuda's cuMemHostAlloc wraps the memory in a direct ByteBuffer, which Java caps at Integer.MAX_VALUE bytes
        long size = (2L << 30) + 4096;
        NativeAllocation pinned = allocate(MemoryLocation.PINNED, size);
        pinned.hostSegment().set(ValueLayout.JAVA_BYTE, size - 1, (byte) 42);
        NativeAllocation device = allocate(MemoryLocation.DEVICE, 4096);
        backend.copyToDevice(pinned.hostSegment().asSlice(size - 4096, 4096), device, 0, 4096);
        byte[] back = new byte[4096];
        backend.copyToHost(device, 0, MemorySegment.ofArray(back), 4096);
        assertThat(back[4095]).isEqualTo((byte) 42);
    }

    @Test
    void anImpossibleAllocationIsOutOfMemoryNamingTheCall() {
        long tooMuch = backend.info().deviceTotalBytes() * 4;
        assertThatThrownBy(() -> backend.allocate(MemoryLocation.DEVICE, tooMuch))
                .isInstanceOf(BackendOutOfMemoryException.class)
                .hasMessageContaining("cuMemAlloc(" + tooMuch + " bytes on device 0)")
                .hasMessageContaining("CUDA_ERROR_OUT_OF_MEMORY (2)");
        assertThat(allocate(MemoryLocation.DEVICE, 1 << 20).address()).isNotZero();
    }

    @Test
    void badArgumentsAreRefusedBeforeTheDriver() {
        NativeAllocation device = allocate(MemoryLocation.DEVICE, 1024);
        assertThatThrownBy(() -> backend.allocate(MemoryLocation.DEVICE, 0)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> backend.copyToDevice(MemorySegment.ofArray(new byte[100]), device, 1000, 100))
                .isInstanceOf(IndexOutOfBoundsException.class);
        assertThatThrownBy(() -> backend.copyToHost(device, 0, MemorySegment.ofArray(new byte[10]), 11))
                .isInstanceOf(IndexOutOfBoundsException.class);
    }

    @Test
    void twoThreadsShareTheDevice() throws Exception {
        CountDownLatch start = new CountDownLatch(1);
        ExecutorService threads = Executors.newFixedThreadPool(2);
        try {
            List<Future<?>> runs = new ArrayList<>();
            for (int t = 0; t < 2; t++) {
                int seed = t;
                runs.add(threads.submit(() -> {
                    Random r = new Random(seed);
                    start.await();
                    for (int i = 0; i < 40; i++) {
                        int size = 1 + r.nextInt(3 << 20);
                        byte[] data = new byte[size];
                        r.nextBytes(data);
                        NativeAllocation a = backend.allocate(MemoryLocation.DEVICE, size);
                        try {
                            backend.copyToDevice(MemorySegment.ofArray(data), a, 0, size);
                            byte[] back = new byte[size];
                            backend.copyToHost(a, 0, MemorySegment.ofArray(back), size);
                            assertThat(back).isEqualTo(data);
                        } finally {
                            backend.free(a);
                        }
                    }
                    return null;
                }));
            }
            start.countDown();
            for (Future<?> run : runs) {
                run.get();
            }
        } finally {
            threads.shutdown();
        }
    }

    @Test
    void twoBackendsOnOneDeviceAndClosingOneLeavesTheOther() {
        CudaBackend second = CudaTestSupport.openBackend(new BackendSettings(0, true, 1 << 20, Map.of("streams", "2")));
        NativeAllocation there = second.allocate(MemoryLocation.DEVICE, 4096);
        byte[] data = randomBytes(4096);
        second.copyToDevice(MemorySegment.ofArray(data), there, 0, 4096);
        second.free(there);
        second.close();
        NativeAllocation here = allocate(MemoryLocation.DEVICE, 4096);
        backend.copyToDevice(MemorySegment.ofArray(data), here, 0, 4096);
        byte[] back = new byte[4096];
        backend.copyToHost(here, 0, MemorySegment.ofArray(back), 4096);
        assertThat(back).isEqualTo(data);
        assertThatThrownBy(() -> second.allocate(MemoryLocation.DEVICE, 1)).isInstanceOf(IllegalStateException.class);
    }

    @Test
    void withPinningDisabledCopiesStillWorkAndPinnedIsRefused() {
        CudaBackend unpinned = CudaTestSupport.openBackend(new BackendSettings(0, false, CudaTestSupport.ODD_STAGING_BYTES, Map.of()));
        try {
            assertThat(unpinned.supports(MemoryLocation.PINNED).available()).isFalse();
            assertThatThrownBy(() -> unpinned.allocate(MemoryLocation.PINNED, 4096)).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("pinning is disabled");
            int size = (3 << 20) + 1;
            byte[] data = randomBytes(size);
            NativeAllocation device = unpinned.allocate(MemoryLocation.DEVICE, size);
            try (Arena arena = Arena.ofConfined()) {
                unpinned.copyToDevice(MemorySegment.ofArray(data), device, 0, size);
                MemorySegment back = arena.allocate(size);
                unpinned.copyToHost(device, 0, back, size);
                assertThat(back.mismatch(MemorySegment.ofArray(data))).isEqualTo(-1);
            } finally {
                unpinned.free(device);
            }
        } finally {
            unpinned.close();
        }
    }
}
