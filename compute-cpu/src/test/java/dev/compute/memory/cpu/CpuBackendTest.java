package dev.compute.memory.cpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.DeviceMemoryInfo;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.spi.BackendOutOfMemoryException;
import dev.compute.memory.spi.BackendSettings;
import dev.compute.memory.spi.NativeAllocation;
import dev.compute.memory.spi.VirtualMemory;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

class CpuBackendTest {

    private final CpuBackend backend = new CpuBackend(BackendSettings.ofDevice(0));
    private final Random random = new Random(7);

    @AfterEach
    void close() {
        backend.close();
    }

    @Test
    void everyLocationIsHostMemoryAndHostIsTheDefault() {
        assertThat(backend.defaultLocation()).isEqualTo(MemoryLocation.HOST);
        for (MemoryLocation location : MemoryLocation.values()) {
            assertThat(backend.supports(location).available()).as("%s", location).isTrue();
            assertThat(backend.hostAccessible(location)).as("%s", location).isTrue();
        }
        assertThat(backend.info().backend()).isEqualTo("cpu");
        assertThat(backend.info().deviceName()).contains("processors");
    }

    @Test
    void memoryInfoComesFromProcMeminfo() {
        DeviceMemoryInfo memory = backend.memoryInfo();
        assertThat(memory.totalBytes()).isPositive();
        assertThat(memory.freeBytes()).isPositive().isLessThanOrEqualTo(memory.totalBytes());
        assertThat(backend.info().deviceTotalBytes()).isEqualTo(memory.totalBytes());
    }

    @Test
    void smallAllocationsAreCacheLineAlignedAndLargeOnesWholePages() {
        List<NativeAllocation> all = new ArrayList<>();
        for (long size : new long[] {1, 3, 63, 65, 4095, 100_003, CpuBackend.MAPPED_THRESHOLD - 1}) {
            NativeAllocation a = backend.allocate(MemoryLocation.DEVICE, size);
            assertThat(a.address() % CpuBackend.ALIGNMENT).as("%d bytes", size).isZero();
            assertThat(a.sizeBytes()).isEqualTo(size);
            assertThat(a.handle()).isEqualTo(CpuBackend.Origin.MALLOC);
            all.add(a);
        }
        for (long size : new long[] {CpuBackend.MAPPED_THRESHOLD, (3L << 20) + 1}) {
            NativeAllocation a = backend.allocate(MemoryLocation.UNIFIED, size);
            assertThat(a.address() % backend.pageSize()).isZero();
            assertThat(a.sizeBytes()).isGreaterThanOrEqualTo(size).isLessThan(size + backend.pageSize());
            assertThat(a.sizeBytes() % backend.pageSize()).isZero();
            assertThat(a.handle()).isEqualTo(CpuBackend.Origin.MAPPED);
            all.add(a);
        }
        for (NativeAllocation a : all) {
            MemorySegment s = a.hostSegment();
            assertThat(s.byteSize()).isEqualTo(a.sizeBytes());
            s.set(ValueLayout.JAVA_BYTE, 0, (byte) 1);
            s.set(ValueLayout.JAVA_BYTE, a.sizeBytes() - 1, (byte) 2);
            assertThat(s.get(ValueLayout.JAVA_BYTE, a.sizeBytes() - 1)).isEqualTo((byte) 2);
        }
        assertThat(backend.liveAllocations()).isEqualTo(all.size());
        all.forEach(backend::free);
        assertThat(backend.liveAllocations()).isZero();
    }

    @Test
    void aDoubleFreeOrAForeignAllocationIsRefusedNotACrash() {
        NativeAllocation a = backend.allocate(MemoryLocation.HOST, 100);
        backend.free(a);
        assertThatThrownBy(() -> backend.free(a)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("freed twice");
        NativeAllocation big = backend.allocate(MemoryLocation.HOST, 1 << 20);
        NativeAllocation forged = new NativeAllocation(MemoryLocation.HOST, big.address() + 4096, 4096, null, CpuBackend.Origin.MAPPED);
        assertThatThrownBy(() -> backend.free(forged)).isInstanceOf(IllegalArgumentException.class);
        NativeAllocation foreign = new NativeAllocation(MemoryLocation.HOST, 4096, 16, null, "cl_mem");
        assertThatThrownBy(() -> backend.free(foreign)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("not an allocation");
        backend.free(big);
    }

    @Test
    void moreThanTheAddressSpaceIsOutOfMemory() {
        // no ledger, so that the kernel is asked
        CpuBackend backend = new CpuBackend(BackendSettings.ofDevice(0), PageLocker.MLOCK, HostMemoryLedger.unlimited());
        assertThatThrownBy(() -> backend.allocate(MemoryLocation.DEVICE, 1L << 60))
                .isInstanceOf(BackendOutOfMemoryException.class)
                .hasMessageContaining("no host memory for " + (1L << 60) + " bytes of DEVICE")
                .hasMessageContaining("ENOMEM");
        assertThatThrownBy(() -> backend.allocate(MemoryLocation.DEVICE, Long.MAX_VALUE)).isInstanceOf(BackendOutOfMemoryException.class);
        assertThat(backend.liveAllocations()).isZero();
    }

    @Test
    void badSizesAndUseAfterCloseAreRefused() {
        assertThatThrownBy(() -> backend.allocate(MemoryLocation.HOST, 0)).isInstanceOf(IllegalArgumentException.class);
        NativeAllocation a = backend.allocate(MemoryLocation.HOST, 32);
        backend.close();
        assertThatThrownBy(() -> backend.allocate(MemoryLocation.HOST, 32)).isInstanceOf(IllegalStateException.class).hasMessageContaining("closed");
        backend.free(a);
    }

    @Test
    void copiesAtOddOffsetsAndSizesFromHeapAndNativeMemory() {
        NativeAllocation first = backend.allocate(MemoryLocation.DEVICE, 10_001);
        NativeAllocation second = backend.allocate(MemoryLocation.HOST, 300_007);
        try {
            byte[] data = new byte[9_973];
            random.nextBytes(data);
            backend.copyToDevice(MemorySegment.ofArray(data), first, 17, data.length);
            byte[] back = new byte[data.length];
            backend.copyToHost(first, 17, MemorySegment.ofArray(back), back.length);
            assertThat(back).isEqualTo(data);

            backend.copyWithinDevice(first, 17, second, 299_007 - data.length, data.length);
            MemorySegment nativeTarget = java.lang.foreign.Arena.ofAuto().allocate(data.length);
            backend.copyToHostAsync(second, 299_007 - data.length, nativeTarget, data.length).join();
            assertThat(nativeTarget.toArray(ValueLayout.JAVA_BYTE)).isEqualTo(data);

            double[] doubles = {Math.PI, -1.5, 1e300};
            backend.copyToDeviceAsync(MemorySegment.ofArray(doubles), second, 3, 24).join();
            assertThat(second.hostSegment().get(ValueLayout.JAVA_DOUBLE_UNALIGNED, 3 + 8)).isEqualTo(-1.5);
        } finally {
            backend.free(first);
            backend.free(second);
        }
    }

    @Test
    void overlappingCopiesWithinOneAllocationMoveAsMemmove() {
        NativeAllocation a = backend.allocate(MemoryLocation.DEVICE, 1000);
        try {
            MemorySegment s = a.hostSegment();
            for (int i = 0; i < 1000; i++) {
                s.set(ValueLayout.JAVA_BYTE, i, (byte) i);
            }
            backend.copyWithinDevice(a, 0, a, 3, 500);
            for (int i = 0; i < 500; i++) {
                assertThat(s.get(ValueLayout.JAVA_BYTE, 3 + i)).isEqualTo((byte) i);
            }
            backend.copyWithinDevice(a, 503, a, 501, 7);
            assertThat(s.get(ValueLayout.JAVA_BYTE, 501)).isEqualTo((byte) 503);
        } finally {
            backend.free(a);
        }
    }

    @Test
    void aLedgerCountsEveryWayOfGettingMemoryAndRefusesPastItsLimit() {
        long mib = 1 << 20;
        HostMemoryLedger ledger = new HostMemoryLedger(16 * mib);
        try (CpuBackend limited = new CpuBackend(BackendSettings.ofDevice(0), PageLocker.MLOCK, ledger)) {
            NativeAllocation small = limited.allocate(MemoryLocation.HOST, 1000);
            NativeAllocation mapped = limited.allocate(MemoryLocation.DEVICE, 4 * mib);
            NativeAllocation pinned = limited.allocate(MemoryLocation.PINNED, 2 * mib);
            VirtualMemory vm = limited.virtualMemory(MemoryLocation.UNIFIED).orElseThrow();
            NativeAllocation range = vm.reserve(64 * mib);
            assertThat(ledger.heldBytes()).as("a reservation is address space, not memory").isEqualTo(1000 + 6 * mib);
            vm.map(range, 0, 8 * mib);
            assertThat(ledger.heldBytes()).isEqualTo(1000 + 14 * mib);

            assertThatThrownBy(() -> vm.map(range, 8 * mib, 2 * mib)).isInstanceOf(BackendOutOfMemoryException.class)
                    .hasMessageStartingWith("no host memory for " + 2 * mib + " bytes of UNIFIED: this process's CPU backends hold "
                            + (1000 + 14 * mib) + " bytes, and " + 2 * mib + " more would pass the " + 16 * mib
                            + " bytes of the machine's memory and swap");
            assertThatThrownBy(() -> limited.allocate(MemoryLocation.HOST, 2 * mib)).isInstanceOf(BackendOutOfMemoryException.class)
                    .hasMessageContaining("would pass the " + 16 * mib + " bytes of the machine's memory and swap");
            assertThat(ledger.heldBytes()).as("refusals hold nothing").isEqualTo(1000 + 14 * mib);

            vm.unmap(range, 0, 8 * mib);
            vm.release(range);
            limited.free(small);
            limited.free(mapped);
            limited.free(pinned);
            assertThat(ledger.heldBytes()).isZero();
        }
    }
}
