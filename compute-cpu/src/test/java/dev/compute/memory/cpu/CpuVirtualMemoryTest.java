package dev.compute.memory.cpu;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.compute.memory.AllocationAboveLimitException;
import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.InvalidSettingException;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.spi.BackendOutOfMemoryException;
import dev.compute.memory.spi.BackendSettings;
import dev.compute.memory.spi.NativeAllocation;
import dev.compute.memory.spi.VirtualMemory;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.io.IOException;
import java.lang.invoke.MethodHandle;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HexFormat;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

class CpuVirtualMemoryTest {

    private static final long MIB = 1 << 20;
    /** More memory than a test machine has: only ever asked for, never touched (tests skip where a kernel grants it). */
    static final long MORE_THAN_THE_MACHINE = 600L << 30;
    private static final MethodHandle MINCORE = Linker.nativeLinker().downcallHandle(
            Linker.nativeLinker().defaultLookup().find("mincore").orElseThrow(),
            FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, ADDRESS));

    private final CpuBackend backend = new CpuBackend(BackendSettings.ofDevice(0));

    @AfterEach
    void close() {
        backend.close();
    }

    @Test
    void offeredWithTwoMebibytePagesEverywhereButPinned() {
        for (MemoryLocation location : new MemoryLocation[] {MemoryLocation.HOST, MemoryLocation.DEVICE, MemoryLocation.UNIFIED}) {
            assertThat(backend.virtualMemory(location)).as("%s", location).get()
                    .extracting(VirtualMemory::granularity).isEqualTo(2 * MIB);
        }
        assertThat(backend.virtualMemory(MemoryLocation.PINNED)).isEmpty();
    }

    @Test
    void reserveMapWriteUnmapRemapRelease() {
        VirtualMemory vm = backend.virtualMemory(MemoryLocation.DEVICE).orElseThrow();
        NativeAllocation range = vm.reserve(7 * MIB);
        assertThat(range.location()).isEqualTo(MemoryLocation.DEVICE);
        assertThat(range.sizeBytes()).isEqualTo(8 * MIB);
        assertThat(range.address() % (2 * MIB)).as("aligned to the granularity").isZero();
        assertThat(residentBytes(range, 0, 8 * MIB)).as("a reservation holds no memory").isZero();

        vm.map(range, 2 * MIB, 4 * MIB);
        MemorySegment mapped = range.hostSegment().asSlice(2 * MIB, 4 * MIB);
        for (long i = 0; i < 4 * MIB; i += 4096) {
            mapped.set(JAVA_LONG, i, i + 1);
        }
        assertThat(mapped.get(JAVA_LONG, 4 * MIB - 4096)).isEqualTo(4 * MIB - 4096 + 1);
        assertThat(residentBytes(range, 2 * MIB, 4 * MIB)).isEqualTo(4 * MIB);
        assertThat(residentBytes(range, 0, 2 * MIB) + residentBytes(range, 6 * MIB, 2 * MIB)).isZero();

        vm.unmap(range, 4 * MIB, 2 * MIB);
        assertThat(residentBytes(range, 4 * MIB, 2 * MIB)).as("unmapped pages went back to the OS").isZero();
        assertThat(mapped.get(JAVA_LONG, 0)).as("the page still mapped keeps its data").isEqualTo(1L);
        vm.map(range, 4 * MIB, 2 * MIB);
        for (long i = 2 * MIB; i < 4 * MIB; i += 4096) {
            assertThat(mapped.get(JAVA_LONG, i)).as("re-mapped page at %d reads zero", i).isZero();
        }
        vm.unmap(range, 2 * MIB, 4 * MIB);
        vm.release(range);
        assertThatThrownBy(() -> vm.release(range)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("released twice");
        assertThatThrownBy(() -> vm.map(range, 0, 2 * MIB)).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void unmappingGivesTheMemoryBackToTheOs() {
        VirtualMemory vm = backend.virtualMemory(MemoryLocation.HOST).orElseThrow();
        NativeAllocation range = vm.reserve(32 * MIB);
        try {
            vm.map(range, 0, 32 * MIB);
            range.hostSegment().fill((byte) 1);
            assertThat(residentBytes(range, 0, 32 * MIB)).isEqualTo(32 * MIB);
            vm.unmap(range, 0, 32 * MIB);
            assertThat(residentBytes(range, 0, 32 * MIB)).isZero();
        } finally {
            vm.release(range);
        }
    }

    @Test
    void unmappedPagesFaultOnAccessRatherThanTakeMemoryAgain() {
        VirtualMemory vm = backend.virtualMemory(MemoryLocation.HOST).orElseThrow();
        NativeAllocation range = vm.reserve(6 * MIB);
        try {
            assertThat(protection(range.address() + 2 * MIB)).as("reserved").isEqualTo("---p");
            vm.map(range, 2 * MIB, 2 * MIB);
            assertThat(protection(range.address() + 2 * MIB)).as("mapped").isEqualTo("rw-p");
            assertThat(protection(range.address())).as("the pages beside it").isEqualTo("---p");
            vm.unmap(range, 2 * MIB, 2 * MIB);
            assertThat(protection(range.address() + 2 * MIB)).as("unmapped").isEqualTo("---p");
        } finally {
            vm.release(range);
        }
    }

    @Test
    void mappingMoreMemoryThanTheMachineHasIsRefusedByTheKernelAsAPlainAllocationIs() {
        assumeThePlainPathRefuses(MORE_THAN_THE_MACHINE);
        // no ledger, so that the kernel is asked
        CpuBackend backend = new CpuBackend(BackendSettings.ofDevice(0), PageLocker.MLOCK, HostMemoryLedger.unlimited());
        VirtualMemory vm = backend.virtualMemory(MemoryLocation.HOST).orElseThrow();
        NativeAllocation range = vm.reserve(MORE_THAN_THE_MACHINE);
        try {
            Throwable mapping = catchThrowable(() -> vm.map(range, 0, MORE_THAN_THE_MACHINE));
            Throwable plain = catchThrowable(() -> backend.allocate(MemoryLocation.HOST, MORE_THAN_THE_MACHINE));

            for (Throwable refusal : new Throwable[] {mapping, plain}) {
                assertThat(refusal).isInstanceOf(BackendOutOfMemoryException.class)
                        .hasMessageStartingWith("no host memory for " + MORE_THAN_THE_MACHINE + " bytes of HOST: ")
                        .hasMessageContaining("ENOMEM")
                        .hasMessageEndingWith(" bytes available)");
            }
            assertThat(mapping).hasMessageContaining("mprotect");
            assertThat(protection(range.address())).as("nothing was mapped").isEqualTo("---p");
            vm.map(range, 0, 2 * MIB);
            range.hostSegment().set(JAVA_LONG, 0, 7L);
            assertThat(range.hostSegment().get(JAVA_LONG, 0)).isEqualTo(7L);
            vm.unmap(range, 0, 2 * MIB);
        } finally {
            vm.release(range);
        }
        assertThat(backend.liveAllocations()).isZero();
    }

    @Test
    void offsetsAndLengthsMustBeWholePagesInsideTheRange() {
        VirtualMemory vm = backend.virtualMemory(MemoryLocation.HOST).orElseThrow();
        NativeAllocation range = vm.reserve(4 * MIB);
        try {
            assertThatThrownBy(() -> vm.map(range, 4096, 2 * MIB)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("whole");
            assertThatThrownBy(() -> vm.map(range, 0, MIB)).isInstanceOf(IllegalArgumentException.class);
            assertThatThrownBy(() -> vm.map(range, 2 * MIB, 4 * MIB)).isInstanceOf(IllegalArgumentException.class);
            assertThatThrownBy(() -> vm.unmap(range, -2 * MIB, 2 * MIB)).isInstanceOf(IllegalArgumentException.class);
            assertThatThrownBy(() -> backend.free(range)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("release");
            assertThatThrownBy(() -> vm.reserve(0)).isInstanceOf(IllegalArgumentException.class);
        } finally {
            vm.release(range);
        }
    }

    @Test
    void thePageSizeIsConfigurableInMultiplesOfTheOsPage() {
        BackendSettings small = new BackendSettings(0, true, BackendSettings.DEFAULT_STAGING_BUFFER_BYTES, Map.of("page-size", "64KB"));
        try (CpuBackend custom = new CpuBackend(small)) {
            VirtualMemory vm = custom.virtualMemory(MemoryLocation.HOST).orElseThrow();
            assertThat(vm.granularity()).isEqualTo(64 << 10);
            NativeAllocation range = vm.reserve(100_000);
            assertThat(range.sizeBytes()).isEqualTo(128 << 10);
            vm.map(range, 64 << 10, 64 << 10);
            range.hostSegment().set(JAVA_LONG, 64 << 10, 5L);
            assertThat(range.hostSegment().get(JAVA_LONG, 64 << 10)).isEqualTo(5L);
            vm.unmap(range, 64 << 10, 64 << 10);
            vm.release(range);
        }
        for (String bad : new String[] {"1000", "0", "two megabytes", "-4096"}) {
            BackendSettings settings = new BackendSettings(0, true, BackendSettings.DEFAULT_STAGING_BUFFER_BYTES, Map.of("page-size", bad));
            assertThatThrownBy(() -> new CpuBackend(settings)).as(bad).isInstanceOf(InvalidSettingException.class)
                    .hasMessageContaining("page-size").hasMessageContaining("multiple of the OS page size");
        }
    }

    @Test
    void aPageSizeTooLargeForAnyRangeIsRefusedAtStartNamingTheOption() {
        // 8GB is a multiple of the OS page, but the pool's reserved range (up to 2^30 pages) overflowed a long: start-up
        // failed with Math.clamp's "549755813888 > -9223372036854775808", naming neither the option nor what is allowed
        for (String huge : new String[] {"8GB", "1024GB", "2GB"}) {
            Throwable failure = catchThrowable(() -> UnifiedMemoryManager.builder().backend("cpu").backendOption("page-size", huge).build().close());
            assertThat(failure).as(huge).isInstanceOf(InvalidSettingException.class)
                    .hasMessageContaining("page-size").hasMessageContaining("at most 1GB");
        }
        try (UnifiedMemoryManager largest = UnifiedMemoryManager.builder().backend("cpu").backendOption("page-size", "1GB").build()) {
            assertThat(largest.settings().backendOptions()).containsEntry("page-size", "1GB");
        }
    }

    @Test
    void anOptionTheCpuBackendDoesNotReadIsRefusedAtStartNamingWhatItReads() {
        // a typo ("pagesize") or another backend's option was ignored, and the manager started on the defaults
        Throwable failure = catchThrowable(() -> UnifiedMemoryManager.builder().backend("cpu").backendOption("pagesize", "64KB").build().close());
        assertThat(failure).isInstanceOf(InvalidSettingException.class).hasMessageContaining("compute.backend-options.pagesize")
                .hasMessageContaining("page-size, pinned-fallback");
    }

    @Test
    void aCapUnderThePageSizeIsRefusedAtStartNamingBoth() {
        // a 512MB cap under 1GB pages started, and then every allocation failed: a segment maps at least one whole page
        Throwable failure = catchThrowable(() -> UnifiedMemoryManager.builder().backend("cpu").maxPoolSize(512L << 20)
                .backendOption("page-size", "1GB").build().close());
        assertThat(failure).isInstanceOf(InvalidSettingException.class).hasMessageContaining("compute.memory.pooling.max-pool-size")
                .hasMessageContaining("page size").hasMessageContaining("expandable-segments");
        UnifiedMemoryManager.builder().backend("cpu").maxPoolSize(512L << 20).backendOption("page-size", "1GB").expandableSegments(false)
                .build().close();
    }

    @Test
    void underACapThatIsNoWholeNumberOfPagesWhatOnlyItsLastPageCouldHoldIsAboveTheLimitAtOnce() {
        // a range maps whole pages: under a cap of 10 MiB in pages of 4 MiB, 8 MiB is the most a buffer can ever have
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend("cpu").maxPoolSize(10 * MIB)
                .backendOption("page-size", "4MB").build()) {
            for (long bytes : new long[] {10 * MIB, 8 * MIB + 1}) {
                assertThatThrownBy(() -> manager.allocate(bytes, MemoryLocation.HOST)).isInstanceOf(AllocationAboveLimitException.class)
                        .hasMessageContaining("requested " + bytes + " bytes").hasMessageContaining("compute.memory.pooling.max-pool-size");
                assertThat(manager.tryAllocate(bytes, MemoryLocation.HOST)).isEmpty();
            }
            assertThat(manager.statistics(MemoryLocation.HOST).oomRetries()).as("nothing was released and retried").isZero();
            manager.allocate(8 * MIB, MemoryLocation.HOST).close();
        }
    }

    /**
     * Under a cap larger than any address space (8 EiB), a request the address space cannot hold is an out-of-memory
     * of the manager's, naming what refused, never the backend's own exception: a reserve the kernel refuses, and one
     * larger than a range can be.
     */
    @Test
    void aRangeTheAddressSpaceCannotHoldIsTheManagersOutOfMemory() {
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend("cpu").maxPoolSize(8388607L << 40).build()) {
            for (long bytes : new long[] {(1L << 62) - (1L << 30), (1L << 62) + (1L << 30)}) {
                assertThatThrownBy(() -> manager.allocate(bytes, MemoryLocation.HOST)).isInstanceOf(DeviceOutOfMemoryException.class)
                        .hasMessageContaining("address space");
                assertThat(manager.tryAllocate(bytes, MemoryLocation.HOST)).isEmpty();
            }
            manager.allocate(MIB, MemoryLocation.HOST).close();
            assertThat(manager.statistics(MemoryLocation.HOST).allocatedBytes()).isZero();
        }
    }

    /**
     * Skips unless the kernel refuses a plain mapping of {@code bytes} (untouched, and given back at once when it is
     * not refused): it does not under {@code vm.overcommit_memory=1}, nor on a machine with that much RAM and swap.
     */
    static void assumeThePlainPathRefuses(long bytes) {
        long address = Posix.mapAnonymous(bytes, Posix.PROT_READ | Posix.PROT_WRITE);
        if (address > 0) {
            Posix.munmap(address, bytes);
        }
        assumeTrue(address < 0, "this kernel grants a plain mapping of " + bytes + " bytes (vm.overcommit_memory=1, or that much"
                + " RAM and swap): there is no refusal to compare with");
    }

    /** The permissions {@code /proc/self/maps} shows for the page at {@code address}, such as {@code rw-p}. */
    private static String protection(long address) {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/maps"))) {
                String[] bounds = line.substring(0, line.indexOf(' ')).split("-");
                if (Long.compareUnsigned(HexFormat.fromHexDigitsToLong(bounds[0]), address) <= 0
                        && Long.compareUnsigned(address, HexFormat.fromHexDigitsToLong(bounds[1])) < 0) {
                    return line.split(" ")[1];
                }
            }
        } catch (IOException e) {
            throw new AssertionError(e);
        }
        throw new AssertionError("no mapping holds " + Long.toHexString(address));
    }

    /** Bytes of {@code [offset, offset + length)} of the range in RAM now, by {@code mincore}, one byte per page. */
    private long residentBytes(NativeAllocation range, long offset, long length) {
        long page = backend.pageSize();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment pages = arena.allocate(length / page);
            int result = (int) MINCORE.invokeExact(MemorySegment.ofAddress(range.address() + offset), length, pages);
            assertThat(result).as("mincore").isZero();
            long resident = 0;
            for (long i = 0; i < pages.byteSize(); i++) {
                resident += (pages.get(JAVA_BYTE, i) & 1) * page;
            }
            return resident;
        } catch (Throwable t) {
            throw new AssertionError(t);
        }
    }
}
