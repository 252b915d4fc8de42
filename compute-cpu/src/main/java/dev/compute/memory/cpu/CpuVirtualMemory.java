package dev.compute.memory.cpu;

import dev.compute.memory.MemoryLocation;
import dev.compute.memory.spi.BackendOutOfMemoryException;
import dev.compute.memory.spi.NativeAllocation;
import dev.compute.memory.spi.VirtualMemory;
import java.lang.foreign.MemorySegment;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Page mapping on the host, as CUDA's {@code cuMemAddressReserve}/{@code cuMemMap} do on a GPU:
 * <ul>
 *   <li>{@link #reserve}: {@code mmap(PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE)}, aligned to the
 *       granularity (so 2 MiB pages can be transparent huge pages). Address space only: no memory, no commit
 *       charge.</li>
 *   <li>{@link #map}: {@code mprotect(PROT_READ | PROT_WRITE)}. The pages become usable; the kernel backs each
 *       one with memory on first touch, as it does for every allocation on Linux.</li>
 *   <li>{@link #unmap}: {@code madvise(MADV_DONTNEED)}, which gives the memory back to the OS at once, then
 *       {@code mprotect(PROT_NONE)}, so a stray access faults instead of quietly taking memory again. A page
 *       mapped again reads as zeros.</li>
 *   <li>{@link #release}: {@code munmap} of the whole range.</li>
 * </ul>
 * The range's host segment spans all of it, but only mapped pages may be touched: an access to an unmapped
 * page is a segmentation fault that ends the JVM. The pool only hands out blocks inside mapped pages.
 *
 * <p>One instance per location (its ranges carry that location). Thread-safe.
 */
final class CpuVirtualMemory implements VirtualMemory {

    private final MemoryLocation location;
    private final long granularity;
    private final Map<Long, NativeAllocation> reserved = new ConcurrentHashMap<>();

    /** {@code granularity} is a multiple of the OS page size (checked by {@link CpuBackendOptions}). */
    CpuVirtualMemory(MemoryLocation location, long granularity) {
        this.location = location;
        this.granularity = granularity;
    }

    @Override
    public long granularity() {
        return granularity;
    }

    /** Reserves {@code sizeBytes} rounded up to the granularity; the range starts on a granularity boundary. */
    @Override
    public NativeAllocation reserve(long sizeBytes) {
        if (sizeBytes <= 0 || sizeBytes > Long.MAX_VALUE / 2) {
            throw new IllegalArgumentException("a reserved range needs a positive size below 2^62 bytes: " + sizeBytes);
        }
        long size = (sizeBytes + granularity - 1) / granularity * granularity;
        // Over-reserve by one granule and trim both ends: mmap only promises page alignment.
        long span = size + granularity;
        long start = Posix.mapAnonymous(span, Posix.PROT_NONE, Posix.MAP_NORESERVE);
        if (start < 0) {
            throw new BackendOutOfMemoryException("cannot reserve " + size + " bytes of address space for " + location
                    + ": mmap failed: " + Posix.describe((int) -start));
        }
        long aligned = (start + granularity - 1) / granularity * granularity;
        if (aligned > start) {
            check(Posix.munmap(start, aligned - start), "munmap of the alignment head");
        }
        if (start + span > aligned + size) {
            check(Posix.munmap(aligned + size, start + span - (aligned + size)), "munmap of the alignment tail");
        }
        NativeAllocation range = new NativeAllocation(location, aligned, size, MemorySegment.ofAddress(aligned).reinterpret(size),
                CpuBackend.Origin.RESERVED);
        reserved.put(aligned, range);
        return range;
    }

    @Override
    public void map(NativeAllocation range, long offset, long length) {
        checkPages(range, offset, length);
        int error = Posix.mprotect(range.address() + offset, length, Posix.PROT_READ | Posix.PROT_WRITE);
        if (error == Posix.ENOMEM) {
            throw new BackendOutOfMemoryException("cannot map " + length + " bytes at offset " + offset + " of a reserved "
                    + location + " range: " + Posix.describe(error));
        }
        check(error, "mprotect(PROT_READ | PROT_WRITE)");
    }

    @Override
    public void unmap(NativeAllocation range, long offset, long length) {
        checkPages(range, offset, length);
        check(Posix.madvise(range.address() + offset, length, Posix.MADV_DONTNEED), "madvise(MADV_DONTNEED)");
        check(Posix.mprotect(range.address() + offset, length, Posix.PROT_NONE), "mprotect(PROT_NONE)");
    }

    @Override
    public void release(NativeAllocation range) {
        if (!reserved.remove(range.address(), range)) {
            throw new IllegalArgumentException("released twice, or not reserved here: " + range);
        }
        check(Posix.munmap(range.address(), range.sizeBytes()), "munmap of a reserved range");
    }

    private void checkPages(NativeAllocation range, long offset, long length) {
        if (!range.equals(reserved.get(range.address()))) {
            throw new IllegalArgumentException("not a range reserved here (or released already): " + range);
        }
        if (offset < 0 || length <= 0 || offset % granularity != 0 || length % granularity != 0 || offset > range.sizeBytes() - length) {
            throw new IllegalArgumentException("[" + offset + ", " + offset + " + " + length + ") is not a run of whole "
                    + granularity + "-byte pages inside a range of " + range.sizeBytes() + " bytes");
        }
    }

    private static void check(int errno, String what) {
        if (errno != 0) {
            throw new IllegalStateException(what + " failed: " + Posix.describe(errno));
        }
    }
}
