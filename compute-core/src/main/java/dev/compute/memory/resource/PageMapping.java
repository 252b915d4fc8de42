package dev.compute.memory.resource;

import dev.compute.memory.spi.BackendOutOfMemoryException;
import dev.compute.memory.spi.NativeAllocation;
import dev.compute.memory.spi.PartialUnmapException;
import dev.compute.memory.spi.VirtualMemory;

/**
 * The backend's page mapping ({@link VirtualMemory}) lent by a {@link BackendResource} to a pool's expandable
 * ranges: mapped pages count in the resource's reserved bytes and against its limit, and each call is timed for
 * its listener. Reserving address space costs no memory and is not counted in bytes. Guarded, as the resource
 * is, by its monitor, but for the driver's call of an {@link #unmap}.
 */
public final class PageMapping {

    private final BackendResource owner;
    private final VirtualMemory memory;

    PageMapping(BackendResource owner, VirtualMemory memory) {
        this.owner = owner;
        this.memory = memory;
    }

    /** The page size of mapping, in bytes. */
    public long granularity() {
        return memory.granularity();
    }

    /**
     * Reserves address space without backing it; throws {@link dev.compute.memory.DeviceOutOfMemoryException} when the
     * backend has no address space that large.
     */
    public NativeAllocation reserve(long sizeBytes) {
        synchronized (owner) {
            owner.ensureOpen();
            NativeAllocation range;
            try {
                range = memory.reserve(sizeBytes);
            } catch (BackendOutOfMemoryException e) {
                throw owner.deviceRefused(sizeBytes, e);
            }
            owner.rangeReserved();
            return range;
        }
    }

    /**
     * Backs {@code [offset, offset + length)} of a range with memory; throws
     * {@link dev.compute.memory.DeviceOutOfMemoryException} when the limit would be passed or the backend has none.
     */
    public void map(NativeAllocation range, long offset, long length) {
        synchronized (owner) {
            if (!owner.fits(length)) {
                throw owner.limitReached(length);
            }
            long start = System.nanoTime();
            try {
                memory.map(range, offset, length);
            } catch (BackendOutOfMemoryException e) {
                throw owner.deviceRefused(length, e);
            }
            owner.pagesMapped(length, System.nanoTime() - start);
        }
    }

    /**
     * Gives the memory behind {@code [offset, offset + length)} back; the addresses stay reserved. The driver is called
     * without the resource's monitor (the caller owns those pages alone): a hung unmap holds up no other map or free.
     */
    public void unmap(NativeAllocation range, long offset, long length) {
        long start = System.nanoTime();
        try {
            memory.unmap(range, offset, length);
        } catch (PartialUnmapException e) {
            unmapped(e.unmappedOffsets().length * memory.granularity(), System.nanoTime() - start);
            throw e;
        }
        unmapped(length, System.nanoTime() - start);
    }

    private void unmapped(long bytes, long nanos) {
        synchronized (owner) {
            owner.pagesUnmapped(bytes, nanos);
        }
    }

    /** Gives an address range back; every page in it must have been unmapped. */
    public void release(NativeAllocation range) {
        synchronized (owner) {
            memory.release(range);
            owner.rangeReleased();
        }
    }
}
