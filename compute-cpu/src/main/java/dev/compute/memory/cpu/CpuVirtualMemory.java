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
 *   <li>{@link #reserve}: {@code mmap(PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS)}, aligned to the granularity (so
 *       2 MiB pages can be transparent huge pages). Address space only: no memory, and no commit charge, since
 *       the kernel charges a private mapping when it is made writable.</li>
 *   <li>{@link #map}: {@code mprotect(PROT_READ | PROT_WRITE)}. The pages become usable and the kernel charges
 *       them; it backs each one with memory on first touch, as it does for every allocation on Linux.</li>
 *   <li>{@link #unmap}: {@code mmap(MAP_FIXED, PROT_NONE)} over the pages: fresh inaccessible pages in their
 *       place, so the memory and the charge go back to the OS at once and a stray access faults instead of
 *       quietly taking memory again. A page mapped again reads as zeros.</li>
 *   <li>{@link #release}: {@code munmap} of the whole range.</li>
 * </ul>
 * The range's host segment spans all of it, but only mapped pages may be touched: an access to an unmapped
 * page is a segmentation fault that ends the JVM. The pool only hands out blocks inside mapped pages.
 *
 * <p><b>Mapping is refused as a plain allocation is.</b> The pages {@link #map} makes writable count in the
 * backend's {@link HostMemoryLedger}, as a plain allocation does, and the kernel charges them against its commit
 * limit exactly as it charges a plain {@code mmap} of that size ({@link CpuBackend#allocate}), so both ways are
 * refused alike, with {@link BackendOutOfMemoryException} and the same message: by the ledger past the machine's
 * memory and swap (the kernel's default heuristic grants every mapping smaller than that, however many), by the
 * kernel under {@code vm.overcommit_memory=2} beyond {@code CommitLimit}. A reservation made with
 * {@code MAP_NORESERVE} would never be charged: a 600 GiB range on a 24 GiB machine would map, and its first
 * touches would bring the OOM killer instead of an exception. {@code mmap(MAP_FIXED, PROT_READ | PROT_WRITE)}
 * would be charged too, but a kernel before 6.12 that refuses it has already removed the pages it was to
 * replace, leaving a hole in the range that another mapping could take; a refused {@code mprotect} leaves
 * them as they were (where it made part of a run writable, {@link #map} puts that part back).
 *
 * <p>One instance per location (its ranges carry that location). Thread-safe.
 */
final class CpuVirtualMemory implements VirtualMemory {

    private final MemoryLocation location;
    private final long granularity;
    private final HostMemoryLedger ledger;
    private final Map<Long, NativeAllocation> reserved = new ConcurrentHashMap<>();

    /** {@code granularity} is a multiple of the OS page size (checked by {@link CpuBackendOptions}). */
    CpuVirtualMemory(MemoryLocation location, long granularity, HostMemoryLedger ledger) {
        this.location = location;
        this.granularity = granularity;
        this.ledger = ledger;
    }

    @Override
    public long granularity() {
        return granularity;
    }

    /** Reserves {@code sizeBytes} rounded up to the granularity; the range starts on a granularity boundary. */
    @Override
    public NativeAllocation reserve(long sizeBytes) {
        if (sizeBytes <= 0) {
            throw new IllegalArgumentException("a reserved range needs a positive size: " + sizeBytes);
        }
        if (sizeBytes > Long.MAX_VALUE / 2) { // far past any machine's address space, and past what the rounding below holds
            throw new BackendOutOfMemoryException("cannot reserve " + sizeBytes + " bytes of address space: a range is below 2^62 bytes");
        }
        long size = (sizeBytes + granularity - 1) / granularity * granularity;
        // Over-reserve by one granule and trim both ends: mmap only promises page alignment.
        long span = size + granularity;
        long start = Posix.mapAnonymous(span, Posix.PROT_NONE);
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
        ledger.take(location, length);
        int error = Posix.mprotect(range.address() + offset, length, Posix.PROT_READ | Posix.PROT_WRITE);
        if (error == 0) {
            return;
        }
        ledger.giveBack(length);
        // over several kernel mappings, mprotect may have made the first writable (and charged) before it refused one
        check(Posix.replaceWithAnonymous(range.address() + offset, length, Posix.PROT_NONE), "mmap(MAP_FIXED, PROT_NONE) after a refused map");
        if (error == Posix.ENOMEM) {
            throw CpuBackend.outOfMemory(location, length, "mprotect(PROT_READ | PROT_WRITE) of reserved pages failed: " + Posix.describe(error));
        }
        check(error, "mprotect(PROT_READ | PROT_WRITE)");
    }

    @Override
    public void unmap(NativeAllocation range, long offset, long length) {
        checkPages(range, offset, length);
        check(Posix.replaceWithAnonymous(range.address() + offset, length, Posix.PROT_NONE), "mmap(MAP_FIXED, PROT_NONE)");
        ledger.giveBack(length);
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
