package dev.compute.memory.cuda;

import static java.lang.foreign.ValueLayout.JAVA_LONG;

import dev.compute.memory.MemoryLocation;
import dev.compute.memory.spi.NativeAllocation;
import dev.compute.memory.spi.PartialUnmapException;
import dev.compute.memory.spi.VirtualMemory;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Page mapping for expandable DEVICE segments: {@code cuMemAddressReserve} a range once, then back it page by
 * page ({@code cuMemCreate} + {@code cuMemMap}, one {@code cuMemSetAccess} per call) and give pages back
 * ({@code cuMemUnmap} + {@code cuMemRelease}). Each page has its own physical handle because the driver can only
 * unmap whole mappings, and the pool unmaps any free pages it likes. All calls are FFM downcalls with zeroed
 * structs (see {@link DriverLibrary}). Thread-safe: a range's page table is guarded by the range (an unmap calls the
 * driver without it: its pages stay recorded as mapped meanwhile).
 */
final class CudaVirtualMemory implements VirtualMemory {

    private static final System.Logger LOG = System.getLogger(CudaVirtualMemory.class.getName());

    /** A reserved range and which of its pages are mapped (0: unmapped, else the physical allocation's handle). */
    static final class ReservedRange {
        final long base;
        final long size;
        final long[] pageHandles;

        ReservedRange(long base, long size, long granularity) {
            this.base = base;
            this.size = size;
            this.pageHandles = new long[Math.toIntExact(size / granularity)];
        }

        @Override
        public String toString() {
            return "ReservedRange[0x" + Long.toHexString(base) + ", " + size + " bytes]";
        }
    }

    private final Runnable makeCurrent;
    private final DriverLibrary driver;
    private final long granularity;
    /** Read-only after construction; the driver only reads them, from any thread. */
    private final Arena structs = Arena.ofShared();
    private final MemorySegment prop;
    private final MemorySegment access;
    /** Ranges reserved and not released: DEVICE memory a device handle may reach. */
    private final AtomicInteger reservedRanges = new AtomicInteger();

    CudaVirtualMemory(CudaContext context) {
        this(context.driver, context.deviceId, context::makeCurrent);
    }

    /** On {@code device} of {@code driver}; {@code makeCurrent} puts the device's context on the calling thread. */
    CudaVirtualMemory(DriverLibrary driver, int device, Runnable makeCurrent) {
        this.makeCurrent = makeCurrent;
        this.driver = driver;
        this.prop = VmmStructs.devicePinnedProp(structs, device);
        this.access = VmmStructs.readWriteAccess(structs, device);
        makeCurrent.run();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(JAVA_LONG);
            CudaResults.check((int) driver.cuMemGetAllocationGranularity.invokeExact(out, prop, VmmStructs.CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                    "cuMemGetAllocationGranularity");
            this.granularity = out.get(JAVA_LONG, 0);
        } catch (Throwable t) {
            structs.close();
            throw DriverLibrary.rethrow(t);
        }
    }

    @Override
    public long granularity() {
        return granularity;
    }

    @Override
    public NativeAllocation reserve(long sizeBytes) {
        if (sizeBytes <= 0) {
            throw new IllegalArgumentException("a reserved range needs a positive size: " + sizeBytes);
        }
        long size = Math.ceilDiv(sizeBytes, granularity) * granularity;
        makeCurrent.run();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(JAVA_LONG);
            CudaResults.check((int) driver.cuMemAddressReserve.invokeExact(out, size, 0L, 0L, 0L),
                    "cuMemAddressReserve(" + size + " bytes)");
            long base = out.get(JAVA_LONG, 0);
            reservedRanges.incrementAndGet();
            return new NativeAllocation(MemoryLocation.DEVICE, base, size, null, new ReservedRange(base, size, granularity));
        } catch (Throwable t) {
            throw DriverLibrary.rethrow(t);
        }
    }

    @Override
    public void map(NativeAllocation range, long offset, long length) {
        ReservedRange r = rangeOf(range);
        int first = firstPage(r, offset, length);
        int count = (int) (length / granularity);
        makeCurrent.run();
        synchronized (r) {
            requirePages(r, first, count, PageState.UNMAPPED);
            int mapped = 0;
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment out = arena.allocate(JAVA_LONG);
                for (; mapped < count; mapped++) {
                    long address = r.base + offset + mapped * granularity;
                    CudaResults.check((int) driver.cuMemCreate.invokeExact(out, granularity, prop, 0L),
                            "cuMemCreate(" + granularity + " bytes, page " + (mapped + 1) + " of " + count + " mapped at once)");
                    long handle = out.get(JAVA_LONG, 0);
                    int result = (int) driver.cuMemMap.invokeExact(address, granularity, 0L, handle, 0L);
                    if (result != CudaResults.SUCCESS) {
                        int ignored = (int) driver.cuMemRelease.invokeExact(handle);
                        throw CudaResults.failure(result, "cuMemMap(0x" + Long.toHexString(address) + ", " + granularity + " bytes)");
                    }
                    r.pageHandles[first + mapped] = handle;
                }
                CudaResults.check((int) driver.cuMemSetAccess.invokeExact(r.base + offset, length, access, 1L),
                        "cuMemSetAccess(" + length + " bytes)");
            } catch (Throwable t) {
                unmapPages(r, first, mapped, Failures.SWALLOW); // a failure of the map's own is the one to throw
                throw DriverLibrary.rethrow(t);
            }
        }
    }

    @Override
    public void unmap(NativeAllocation range, long offset, long length) {
        ReservedRange r = rangeOf(range);
        int first = firstPage(r, offset, length);
        int count = (int) (length / granularity);
        makeCurrent.run();
        synchronized (r) {
            requirePages(r, first, count, PageState.MAPPED);
        }
        // the unmaps without the range's monitor, so that a hung driver holds up no map of the range's other pages: these
        // stay recorded as mapped until they are unmapped, so no map takes them meanwhile, and they are the caller's alone.
        // All or nothing: a pool whose unmap throws holds the run as mapped, and would hand out a page this call
        // unmapped. So the pages are unmapped first and their handles kept until every one is, then released.
        int unmapped = 0;
        try {
            for (; unmapped < count; unmapped++) {
                long address = r.base + offset + unmapped * granularity;
                CudaResults.check((int) driver.cuMemUnmap.invokeExact(address, granularity),
                        "cuMemUnmap(0x" + Long.toHexString(address) + ", " + granularity + " bytes)");
            }
        } catch (Throwable t) {
            RuntimeException failure = DriverLibrary.rethrow(t);
            long[] lost;
            synchronized (r) {
                lost = remapPages(r, first, unmapped, failure);
            }
            if (lost.length > 0) {
                throw new PartialUnmapException(failure.getMessage() + "; " + lost.length + " of the " + unmapped
                        + " pages it had unmapped could not be mapped back and stay unmapped", failure, lost);
            }
            throw failure;
        }
        synchronized (r) {
            for (int p = first; p < first + count; p++) {
                releaseHandle(r, p);
            }
        }
    }

    /**
     * Maps {@code count} pages from {@code first} back with the handles they still hold, after an unmap failed part way;
     * a page that cannot be is recorded as unmapped (its handle released) and the failure added to {@code failure}.
     * Returns the offsets in the range of those pages.
     */
    private long[] remapPages(ReservedRange r, int first, int count, RuntimeException failure) {
        long[] lost = new long[count];
        int lostCount = 0;
        for (int p = first; p < first + count; p++) {
            long address = r.base + p * granularity;
            boolean mapped = false;
            try {
                CudaResults.check((int) driver.cuMemMap.invokeExact(address, granularity, 0L, r.pageHandles[p], 0L),
                        "cuMemMap(0x" + Long.toHexString(address) + ", " + granularity + " bytes) after a failed unmap");
                mapped = true;
                CudaResults.check((int) driver.cuMemSetAccess.invokeExact(address, granularity, access, 1L),
                        "cuMemSetAccess(" + granularity + " bytes) after a failed unmap");
            } catch (Throwable t) {
                failure.addSuppressed(t);
                if (mapped) { // mapped without access: unusable, and a later map of the page would find it taken
                    unmapPages(r, p, 1, Failures.SWALLOW);
                } else {
                    releaseHandle(r, p);
                }
                if (r.pageHandles[p] == 0) {
                    lost[lostCount++] = p * granularity;
                }
            }
        }
        return Arrays.copyOf(lost, lostCount);
    }

    /** Releases the physical memory of an unmapped page; a failure leaks it, and is logged: the page is unmapped either way. */
    private void releaseHandle(ReservedRange r, int page) {
        long handle = r.pageHandles[page];
        r.pageHandles[page] = 0;
        try {
            int released = (int) driver.cuMemRelease.invokeExact(handle);
            if (released != CudaResults.SUCCESS) {
                LOG.log(System.Logger.Level.WARNING, "cuMemRelease of page " + page + " of " + r + " failed: "
                        + CudaResults.name(released) + "; its memory stays allocated until the context is reset");
            }
        } catch (Throwable t) {
            throw DriverLibrary.rethrow(t);
        }
    }

    @Override
    public void release(NativeAllocation range) {
        ReservedRange r = rangeOf(range);
        makeCurrent.run();
        synchronized (r) {
            // the SPI asks for every page unmapped first; unmapping leftovers keeps physical memory from leaking
            unmapPages(r, 0, r.pageHandles.length, Failures.THROW);
            try {
                CudaResults.check((int) driver.cuMemAddressFree.invokeExact(r.base, r.size), "cuMemAddressFree(" + r.size + " bytes)");
                reservedRanges.decrementAndGet();
            } catch (Throwable t) {
                throw DriverLibrary.rethrow(t);
            }
        }
    }

    /** Whether a page must be mapped or unmapped before a call. */
    private enum PageState { MAPPED, UNMAPPED }

    /** What {@link #unmapPages} does with the driver's failures. */
    private enum Failures { THROW, SWALLOW }

    /**
     * Unmaps and releases the mapped pages among {@code count} from {@code first}, page by page (a page the driver would
     * not unmap stays mapped); the first failure is thrown where {@code failures} says so.
     */
    private void unmapPages(ReservedRange r, int first, int count, Failures failures) {
        RuntimeException failure = null;
        for (int p = first; p < first + count; p++) {
            long handle = r.pageHandles[p];
            if (handle == 0) {
                continue;
            }
            long address = r.base + p * granularity;
            try {
                int unmapped = (int) driver.cuMemUnmap.invokeExact(address, granularity);
                if (unmapped != CudaResults.SUCCESS) {
                    // still mapped: the page keeps its handle, and the table says so
                    if (failure == null) {
                        failure = CudaResults.failure(unmapped, "cuMemUnmap(0x" + Long.toHexString(address) + ", " + granularity + " bytes)");
                    }
                    continue;
                }
                releaseHandle(r, p);
            } catch (Throwable t) {
                if (failure == null) {
                    failure = DriverLibrary.rethrow(t);
                }
            }
        }
        if (failures == Failures.THROW && failure != null) {
            throw failure;
        }
    }

    /** Throws unless every one of {@code count} pages from {@code first} is mapped (or, if not {@code mapped}, unmapped). */
    private static void requirePages(ReservedRange r, int first, int count, PageState state) {
        boolean mapped = state == PageState.MAPPED;
        for (int p = first; p < first + count; p++) {
            if ((r.pageHandles[p] != 0) != mapped) {
                throw new IllegalStateException("page " + p + " of " + r + (mapped ? " is not mapped" : " is mapped already"));
            }
        }
    }

    private int firstPage(ReservedRange r, long offset, long length) {
        if (offset < 0 || length <= 0 || offset % granularity != 0 || length % granularity != 0 || offset > r.size - length) {
            throw new IllegalArgumentException("[" + offset + ", " + offset + " + " + length + ") is not a run of whole "
                    + granularity + "-byte pages inside " + r);
        }
        return (int) (offset / granularity);
    }

    private static ReservedRange rangeOf(NativeAllocation range) {
        if (!(range.handle() instanceof ReservedRange r)) {
            throw new IllegalArgumentException("not a range reserved by this backend's virtual memory: " + range);
        }
        return r;
    }

    /** Whether a reserved range is still held (the pool releases them before the backend closes, unless it kept its memory). */
    boolean holdsRanges() {
        return reservedRanges.get() > 0;
    }

    /** Frees the structs; ranges must have been released (the pool releases them before the backend closes). */
    void close() {
        structs.close();
    }
}
