package dev.compute.memory.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.MemoryLocation;
import dev.compute.memory.spi.BackendOutOfMemoryException;
import dev.compute.memory.spi.NativeAllocation;
import dev.compute.memory.spi.PartialUnmapException;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.file.Path;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The FFM half of the backend against a stand-in driver ({@code src/test/c/fake-libcuda.c}, compiled here with
 * the system's C compiler): every downcall's signature (a mismatch fails at the first call), the zeroed structs
 * as the driver reads them, and the page table of {@link CudaVirtualMemory}: handles balanced, rollback on out of
 * memory, bad ranges refused. Skips where there is no C compiler or the source is not at hand.
 */
class FakeDriverTest {

    @TempDir
    static Path dir;
    private static Arena arena;
    private static DriverLibrary driver;
    private static MethodHandle counters;
    private static MethodHandle failUnmap;
    private static MethodHandle failMap;
    private static MethodHandle failSetAccess;

    @BeforeAll
    static void build() throws IOException, InterruptedException {
        // not named libcuda.so.1: loaded into this JVM under that name, it would answer other tests' probes for a driver
        Path library = FakeDriverLibrary.compile(dir, "libfakecuda.so");
        arena = Arena.ofShared();
        driver = DriverLibrary.open(library, arena);
        counters = Linker.nativeLinker().downcallHandle(SymbolLookup.libraryLookup(library, arena).find("stub_counters").orElseThrow(),
                FunctionDescriptor.ofVoid(ValueLayout.ADDRESS));
        failUnmap = Linker.nativeLinker().downcallHandle(SymbolLookup.libraryLookup(library, arena).find("stub_fail_unmap").orElseThrow(),
                FunctionDescriptor.ofVoid(ValueLayout.JAVA_LONG));
        failMap = Linker.nativeLinker().downcallHandle(SymbolLookup.libraryLookup(library, arena).find("stub_fail_map").orElseThrow(),
                FunctionDescriptor.ofVoid(ValueLayout.JAVA_LONG));
        failSetAccess = Linker.nativeLinker().downcallHandle(SymbolLookup.libraryLookup(library, arena).find("stub_fail_set_access")
                .orElseThrow(), FunctionDescriptor.ofVoid(ValueLayout.JAVA_LONG));
    }

    @AfterAll
    static void unload() {
        if (arena != null) {
            arena.close();
        }
    }

    /** created, released, mapped, unmapped, reserved, freed, setAccess calls, rejected calls, live pages. */
    private static long[] counters() throws Throwable {
        try (Arena scratch = Arena.ofConfined()) {
            MemorySegment out = scratch.allocate(ValueLayout.JAVA_LONG, 9);
            counters.invokeExact(out);
            return out.toArray(ValueLayout.JAVA_LONG);
        }
    }

    @Test
    void theProbeCallsReadWhatTheDriverWrites() {
        assertThat(driver.init()).isZero();
        assertThat(driver.driverVersion()).isEqualTo(13000);
        assertThat(driver.deviceCount()).isEqualTo(1);
        assertThat(driver.deviceName(driver.device(0))).isEqualTo("Stub GPU 0");
        assertThat(driver.computeCapability(driver.device(0))).isEqualTo(90);
        try (Arena scratch = Arena.ofConfined()) {
            assertThat(driver.currentContext(scratch.allocate(ValueLayout.JAVA_LONG))).isZero();
        }
        assertThatThrownBy(() -> driver.device(1)).isInstanceOfSatisfying(CudaException.class, e -> {
            assertThat(e.call()).isEqualTo("cuDeviceGet(1)");
            assertThat(e).hasMessage("cuDeviceGet(1) failed: CUDA_ERROR_INVALID_DEVICE (101)");
        });
    }

    @Test
    void pinnedHostMemoryIsAllocatedAndFreedThroughTheDriver() throws Throwable {
        long address = driver.hostAlloc(3 << 20, 3, "cuMemHostAlloc(3 MiB)");
        assertThat(address).isNotZero();
        MemorySegment memory = MemorySegment.ofAddress(address).reinterpret(3 << 20);
        memory.fill((byte) 5);
        assertThat(memory.get(ValueLayout.JAVA_BYTE, (3 << 20) - 1)).isEqualTo((byte) 5);
        assertThat(driver.freeHost(address)).isZero();
        assertThatThrownBy(() -> driver.hostAlloc(16, 1 << 8, "cuMemHostAlloc(16 bytes)")).isInstanceOfSatisfying(CudaException.class,
                e -> assertThat(e).hasMessage("cuMemHostAlloc(16 bytes) failed: CUDA_ERROR_INVALID_VALUE (1)"));
    }

    @Test
    void pagesMapAndUnmapWithZeroedStructsAndBalancedHandles() throws Throwable {
        long[] before = counters();
        CudaVirtualMemory vmm = new CudaVirtualMemory(driver, 0, () -> {});
        long g = vmm.granularity();
        assertThat(g).isEqualTo(2L << 20);
        NativeAllocation range = vmm.reserve(20 * g - 1);
        assertThat(range.sizeBytes()).isEqualTo(20 * g);
        assertThat(range.location()).isEqualTo(MemoryLocation.DEVICE);
        vmm.map(range, 2 * g, 4 * g);
        vmm.unmap(range, 3 * g, 2 * g);
        vmm.map(range, 3 * g, g);
        vmm.release(range); // unmaps what is left first
        vmm.close();
        long[] after = counters();
        long created = after[0] - before[0];
        assertThat(created).isEqualTo(5);
        assertThat(after[1] - before[1]).as("released").isEqualTo(created);
        assertThat(after[2] - before[2]).as("mapped").isEqualTo(5);
        assertThat(after[3] - before[3]).as("unmapped").isEqualTo(5);
        assertThat(after[4] - before[4]).as("reserved").isEqualTo(1);
        assertThat(after[5] - before[5]).as("freed").isEqualTo(1);
        assertThat(after[6] - before[6]).as("one setAccess per map call").isEqualTo(2);
        assertThat(after[7]).as("calls the fake driver rejected").isZero();
        assertThat(after[8]).as("live pages").isZero();
    }

    @Test
    void outOfMemoryWhileMappingGivesBackThePagesOfThatCallOnly() throws Throwable {
        CudaVirtualMemory vmm = new CudaVirtualMemory(driver, 0, () -> {});
        long g = vmm.granularity();
        NativeAllocation range = vmm.reserve(32 * g);
        try {
            vmm.map(range, 0, 2 * g);
            assertThatThrownBy(() -> vmm.map(range, 4 * g, 12 * g))
                    .isExactlyInstanceOf(BackendOutOfMemoryException.class)
                    .hasMessage("cuMemCreate(2097152 bytes, page 9 of 12 mapped at once) failed: CUDA_ERROR_OUT_OF_MEMORY (2)");
            assertThat(counters()[8]).as("live pages after the rollback").isEqualTo(2);
            vmm.map(range, 4 * g, 8 * g); // the pages of the failed call are free to map again
            vmm.unmap(range, 4 * g, 8 * g);
            vmm.unmap(range, 0, 2 * g);
        } finally {
            vmm.release(range);
            vmm.close();
        }
        assertThat(counters()[8]).isZero();
        assertThat(counters()[7]).isZero();
    }

    /**
     * A map that fails after pages were created and mapped (a page's cuMemMap refused, or the cuMemSetAccess over the
     * call's pages) gives back every page of that call, mapped or only created, and no other: nothing leaks, nothing
     * stays mapped without access, and the pages are free to map again.
     */
    @Test
    void aMapThatFailsAfterCreatingOrMappingGivesBackEveryPageOfThatCall() throws Throwable {
        CudaVirtualMemory vmm = new CudaVirtualMemory(driver, 0, () -> {});
        long g = vmm.granularity();
        NativeAllocation range = vmm.reserve(8 * g);
        try {
            vmm.map(range, 0, g);
            long[] before = counters();
            failMap.invokeExact(range.address() + 3 * g); // the third page of the call: two mapped, one created
            assertThatThrownBy(() -> vmm.map(range, g, 4 * g)).isInstanceOfSatisfying(CudaException.class,
                    e -> assertThat(e).hasMessageStartingWith("cuMemMap(0x" + Long.toHexString(range.address() + 3 * g)));
            long[] afterMap = counters();
            assertThat(afterMap[8]).as("live pages").isEqualTo(before[8]);
            assertThat(afterMap[1] - before[1]).as("released: every page the call created").isEqualTo(afterMap[0] - before[0]).isEqualTo(3);
            assertThat(afterMap[3] - before[3]).as("unmapped: the two it mapped").isEqualTo(2);

            failSetAccess.invokeExact(range.address() + g); // every page of the call mapped, then no access
            assertThatThrownBy(() -> vmm.map(range, g, 4 * g)).isInstanceOfSatisfying(CudaException.class,
                    e -> assertThat(e).hasMessageStartingWith("cuMemSetAccess(" + 4 * g + " bytes) failed"));
            long[] afterAccess = counters();
            assertThat(afterAccess[8]).as("live pages").isEqualTo(before[8]);
            assertThat(afterAccess[3] - afterMap[3]).as("unmapped: the four it mapped").isEqualTo(4);

            vmm.map(range, g, 4 * g); // the pages of the failed calls are free to map again
            assertThat(counters()[8]).isEqualTo(before[8] + 4);
            vmm.unmap(range, 0, 5 * g);
        } finally {
            vmm.release(range);
            vmm.close();
        }
        assertThat(counters()[8]).as("live pages").isZero();
        assertThat(counters()[7]).as("calls the fake driver rejected").isZero();
    }

    @Test
    void aFailedUnmapLeavesEveryPageOfItsCallMappedAndHeld() throws Throwable {
        CudaVirtualMemory vmm = new CudaVirtualMemory(driver, 0, () -> {});
        long g = vmm.granularity();
        NativeAllocation range = vmm.reserve(8 * g);
        try {
            vmm.map(range, 0, 4 * g);
            long live = counters()[8];
            failUnmap.invokeExact(range.address() + 2 * g);
            assertThatThrownBy(() -> vmm.unmap(range, 0, 4 * g)).isInstanceOfSatisfying(CudaException.class,
                    e -> assertThat(e).hasMessageStartingWith("cuMemUnmap(0x" + Long.toHexString(range.address() + 2 * g)));
            // the pool counts the call's pages as mapped still: so must the page table and the driver
            assertThat(counters()[8]).as("live pages: none given back").isEqualTo(live);
            assertThatThrownBy(() -> vmm.map(range, 0, g)).isInstanceOf(IllegalStateException.class).hasMessageContaining("mapped already");
            assertThatThrownBy(() -> vmm.map(range, 2 * g, g)).isInstanceOf(IllegalStateException.class).hasMessageContaining("mapped already");
            vmm.unmap(range, 0, 4 * g); // a later try gives them back
            assertThat(counters()[8]).isEqualTo(live - 4);
        } finally {
            vmm.release(range);
            vmm.close();
        }
        assertThat(counters()[7]).as("calls the fake driver rejected").isZero();
    }

    @Test
    void anUnmapFailedPartWayNamesThePagesItCouldNotMapBack() throws Throwable {
        CudaVirtualMemory vmm = new CudaVirtualMemory(driver, 0, () -> {});
        long g = vmm.granularity();
        NativeAllocation range = vmm.reserve(8 * g);
        try {
            vmm.map(range, 0, 4 * g);
            long live = counters()[8];
            failUnmap.invokeExact(range.address() + 2 * g); // pages 0 and 1 are unmapped by then, and mapped back
            failMap.invokeExact(range.address() + g); // but page 1 cannot be
            assertThatThrownBy(() -> vmm.unmap(range, 0, 4 * g)).isInstanceOfSatisfying(PartialUnmapException.class, e -> {
                assertThat(e.unmappedOffsets()).containsExactly(g);
                assertThat(e).hasMessageStartingWith("cuMemUnmap(0x" + Long.toHexString(range.address() + 2 * g))
                        .hasMessageContaining("1 of the 2 pages it had unmapped could not be mapped back");
                assertThat(e.getCause().getSuppressed()).singleElement().asString().contains("cuMemMap(0x" + Long.toHexString(range.address() + g));
            });
            assertThat(counters()[8]).as("live pages: the one left unmapped given back").isEqualTo(live - 1);
            vmm.map(range, g, g); // the page the exception names is free to map again; the others are mapped still
            assertThatThrownBy(() -> vmm.map(range, 0, g)).isInstanceOf(IllegalStateException.class).hasMessageContaining("mapped already");
            assertThatThrownBy(() -> vmm.map(range, 3 * g, g)).isInstanceOf(IllegalStateException.class).hasMessageContaining("mapped already");
            vmm.unmap(range, 0, 4 * g);
            assertThat(counters()[8]).isEqualTo(live - 4);
        } finally {
            vmm.release(range);
            vmm.close();
        }
        assertThat(counters()[7]).as("calls the fake driver rejected").isZero();
    }

    @Test
    void badRangesAreRefusedBeforeTheDriver() throws Throwable {
        CudaVirtualMemory vmm = new CudaVirtualMemory(driver, 0, () -> {});
        long g = vmm.granularity();
        NativeAllocation range = vmm.reserve(4 * g);
        try {
            assertThatThrownBy(() -> vmm.map(range, 1, g)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("whole");
            assertThatThrownBy(() -> vmm.map(range, 0, g + 1)).isInstanceOf(IllegalArgumentException.class);
            assertThatThrownBy(() -> vmm.map(range, 2 * g, 3 * g)).isInstanceOf(IllegalArgumentException.class);
            assertThatThrownBy(() -> vmm.unmap(range, 0, g)).isInstanceOf(IllegalStateException.class).hasMessageContaining("not mapped");
            vmm.map(range, 0, 2 * g);
            assertThatThrownBy(() -> vmm.map(range, g, 2 * g)).isInstanceOf(IllegalStateException.class).hasMessageContaining("mapped already");
            assertThatThrownBy(() -> vmm.reserve(0)).isInstanceOf(IllegalArgumentException.class);
            NativeAllocation foreign = new NativeAllocation(MemoryLocation.DEVICE, 0x1000, g, null, null);
            assertThatThrownBy(() -> vmm.map(foreign, 0, g)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("not a range reserved");
        } finally {
            vmm.release(range);
            vmm.close();
        }
        assertThat(counters()[7]).as("nothing bad reached the driver").isZero();
    }
}
