package dev.compute.memory.testing;

import dev.compute.memory.BackendInfo;
import dev.compute.memory.DeviceMemoryInfo;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.spi.BackendAvailability;
import dev.compute.memory.spi.BackendOutOfMemoryException;
import dev.compute.memory.spi.ComputeBackend;
import dev.compute.memory.spi.KernelOps;
import dev.compute.memory.spi.NativeAllocation;
import dev.compute.memory.spi.VirtualMemory;
import java.lang.foreign.MemorySegment;
import java.util.BitSet;
import java.util.HashMap;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A device that hands out addresses and touches no memory: for driving a pool through millions of
 * allocations, or a multi-gigabyte trace, in a unit test. It keeps the books a real driver keeps, and checks
 * them: {@code capacity} bytes of memory, used by plain allocations and mapped pages (reserved address
 * ranges cost none); page maps and unmaps must be page-aligned, inside their range, and must not map a page
 * twice or unmap one that is not mapped; a range is released only with nothing mapped; a free must name a
 * live allocation. Every call is counted, so tests and the replayer see exactly what the pool asked for.
 * Offers {@link VirtualMemory} unless built without. Memory cannot be read or written: copies and kernels
 * throw {@link UnsupportedOperationException}. Thread-safe.
 */
public final class AddressSpaceBackend implements ComputeBackend {

    public static final long DEFAULT_GRANULARITY = 2L << 20;
    /** Where handed-out addresses start: far from zero, so an offset mistaken for an address shows. */
    private static final long BASE_ADDRESS = 1L << 40;

    private final long capacity;
    private final long granularity;
    private final boolean pageMapping;
    private final Map<Long, NativeAllocation> allocations = new HashMap<>();
    private final Map<Long, BitSet> ranges = new HashMap<>();
    private long nextAddress = BASE_ADDRESS;
    private long used;
    private final AtomicLong allocateCalls = new AtomicLong();
    private final AtomicLong freeCalls = new AtomicLong();
    private final AtomicLong reserveCalls = new AtomicLong();
    private final AtomicLong releaseCalls = new AtomicLong();
    private final AtomicLong mapCalls = new AtomicLong();
    private final AtomicLong unmapCalls = new AtomicLong();
    private final AtomicLong refusals = new AtomicLong();

    public AddressSpaceBackend(long capacity, long granularity, boolean pageMapping) {
        if (capacity <= 0 || granularity <= 0 || Long.bitCount(granularity) != 1) {
            throw new IllegalArgumentException("capacity must be positive and granularity a power of two: " + capacity + ", " + granularity);
        }
        this.capacity = capacity;
        this.granularity = granularity;
        this.pageMapping = pageMapping;
    }

    /** With page mapping at 2 MiB pages, as CUDA's. */
    public AddressSpaceBackend(long capacity) {
        this(capacity, DEFAULT_GRANULARITY, true);
    }

    // ---- the books ----------------------------------------------------------------------------------------------

    public long capacity() {
        return capacity;
    }

    /** Bytes of memory in use: plain allocations plus mapped pages. */
    public synchronized long usedBytes() {
        return used;
    }

    public long allocateCalls() {
        return allocateCalls.get();
    }

    public long freeCalls() {
        return freeCalls.get();
    }

    public long reserveCalls() {
        return reserveCalls.get();
    }

    public long releaseCalls() {
        return releaseCalls.get();
    }

    public long mapCalls() {
        return mapCalls.get();
    }

    public long unmapCalls() {
        return unmapCalls.get();
    }

    /** Requests refused for want of memory. */
    public long refusals() {
        return refusals.get();
    }

    /** Every call that got or gave back memory or address space. */
    public long memoryCalls() {
        return allocateCalls.get() + freeCalls.get() + reserveCalls.get() + releaseCalls.get() + mapCalls.get() + unmapCalls.get();
    }

    /** Plain allocations plus reserved ranges not given back. */
    public synchronized int liveAllocations() {
        return allocations.size() + ranges.size();
    }

    // ---- memory -------------------------------------------------------------------------------------------------

    @Override
    public BackendInfo info() {
        return new BackendInfo("address-space", 0, "address space of " + capacity + " bytes, no memory behind it", capacity);
    }

    @Override
    public synchronized DeviceMemoryInfo memoryInfo() {
        return new DeviceMemoryInfo(capacity - used, capacity);
    }

    @Override
    public MemoryLocation defaultLocation() {
        return MemoryLocation.DEVICE;
    }

    @Override
    public BackendAvailability supports(MemoryLocation location) {
        return BackendAvailability.available("address space for " + location);
    }

    @Override
    public boolean hostAccessible(MemoryLocation location) {
        return false;
    }

    @Override
    public synchronized NativeAllocation allocate(MemoryLocation location, long sizeBytes) {
        allocateCalls.incrementAndGet();
        if (sizeBytes <= 0) {
            throw new IllegalArgumentException("allocation size must be positive: " + sizeBytes);
        }
        take(sizeBytes);
        NativeAllocation allocation = new NativeAllocation(location, addressFor(sizeBytes), sizeBytes, null, null);
        allocations.put(allocation.address(), allocation);
        return allocation;
    }

    @Override
    public synchronized void free(NativeAllocation allocation) {
        freeCalls.incrementAndGet();
        if (allocations.remove(allocation.address()) == null) {
            throw new IllegalStateException("free of an allocation that is not live (double free, or a range): " + allocation);
        }
        used -= allocation.sizeBytes();
    }

    private void take(long bytes) {
        if (bytes > capacity - used) {
            refusals.incrementAndGet();
            throw new BackendOutOfMemoryException("address-space device full: " + bytes + " bytes asked, "
                    + (capacity - used) + " of " + capacity + " free");
        }
        used += bytes;
    }

    private long addressFor(long sizeBytes) {
        long address = nextAddress;
        nextAddress += Math.ceilDiv(sizeBytes, granularity) * granularity;
        return address;
    }

    @Override
    public Optional<VirtualMemory> virtualMemory(MemoryLocation location) {
        return pageMapping ? Optional.of(pages) : Optional.empty();
    }

    private final VirtualMemory pages = new VirtualMemory() {
        @Override
        public long granularity() {
            return granularity;
        }

        @Override
        public NativeAllocation reserve(long sizeBytes) {
            synchronized (AddressSpaceBackend.this) {
                reserveCalls.incrementAndGet();
                if (sizeBytes <= 0 || sizeBytes % granularity != 0) {
                    throw new IllegalArgumentException("a range is a positive whole number of pages: " + sizeBytes);
                }
                if (sizeBytes > (1L << 50)) {
                    refusals.incrementAndGet();
                    throw new BackendOutOfMemoryException("address space exhausted: " + sizeBytes + " bytes asked");
                }
                NativeAllocation range = new NativeAllocation(MemoryLocation.DEVICE, addressFor(sizeBytes), sizeBytes, null, null);
                ranges.put(range.address(), new BitSet());
                return range;
            }
        }

        @Override
        public void map(NativeAllocation range, long offset, long length) {
            synchronized (AddressSpaceBackend.this) {
                mapCalls.incrementAndGet();
                BitSet mapped = pagesOf(range, offset, length);
                int from = (int) (offset / granularity);
                int to = (int) ((offset + length) / granularity);
                int clash = mapped.nextSetBit(from);
                if (clash >= 0 && clash < to) {
                    throw new IllegalStateException("page " + clash + " of " + range + " is mapped already");
                }
                take(length);
                mapped.set(from, to);
            }
        }

        @Override
        public void unmap(NativeAllocation range, long offset, long length) {
            synchronized (AddressSpaceBackend.this) {
                unmapCalls.incrementAndGet();
                BitSet mapped = pagesOf(range, offset, length);
                int from = (int) (offset / granularity);
                int to = (int) ((offset + length) / granularity);
                int hole = mapped.nextClearBit(from);
                if (hole < to) {
                    throw new IllegalStateException("page " + hole + " of " + range + " is not mapped");
                }
                mapped.clear(from, to);
                used -= length;
            }
        }

        @Override
        public void release(NativeAllocation range) {
            synchronized (AddressSpaceBackend.this) {
                releaseCalls.incrementAndGet();
                BitSet mapped = ranges.get(range.address());
                if (mapped == null) {
                    throw new IllegalStateException("release of a range that is not reserved: " + range);
                }
                if (!mapped.isEmpty()) {
                    throw new IllegalStateException(mapped.cardinality() + " pages of " + range + " are still mapped");
                }
                ranges.remove(range.address());
            }
        }

        private BitSet pagesOf(NativeAllocation range, long offset, long length) {
            BitSet mapped = ranges.get(range.address());
            if (mapped == null) {
                throw new IllegalStateException("not a reserved range: " + range);
            }
            if (offset < 0 || length <= 0 || offset % granularity != 0 || length % granularity != 0 || offset + length > range.sizeBytes()) {
                throw new IllegalArgumentException("pages must be whole and inside the range: offset " + offset + ", length " + length + " in " + range);
            }
            return mapped;
        }
    };

    // ---- no memory behind the addresses -------------------------------------------------------------------------

    @Override
    public void copyToDevice(MemorySegment source, NativeAllocation target, long targetOffset, long bytes) {
        throw noMemory();
    }

    @Override
    public void copyToHost(NativeAllocation source, long sourceOffset, MemorySegment target, long bytes) {
        throw noMemory();
    }

    @Override
    public void copyWithinDevice(NativeAllocation source, long sourceOffset, NativeAllocation target, long targetOffset, long bytes) {
        throw noMemory();
    }

    @Override
    public KernelOps ops() {
        throw noMemory();
    }

    private static UnsupportedOperationException noMemory() {
        return new UnsupportedOperationException("an address-space backend has addresses but no memory behind them");
    }

    @Override
    public void close() {
        // nothing is held beyond the books, which tests read after closing
    }
}
