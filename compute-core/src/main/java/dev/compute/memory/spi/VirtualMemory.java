package dev.compute.memory.spi;

/**
 * Page mapping into reserved address ranges, for expandable segments: reserve a large range once, map
 * physical pages into it as blocks need them, unmap pages that are free. Offsets and lengths passed to
 * {@link #map} and {@link #unmap} are multiples of {@link #granularity()}.
 */
public interface VirtualMemory {

    /** The page size of mapping, in bytes (2 MiB on CUDA). */
    long granularity();

    /** Reserves address space without backing it. */
    NativeAllocation reserve(long sizeBytes);

    /** Backs {@code [offset, offset + length)} of a reserved range with memory; throws {@link BackendOutOfMemoryException} when there is none. */
    void map(NativeAllocation range, long offset, long length);

    /**
     * Gives the memory behind {@code [offset, offset + length)} back; the addresses stay reserved. All or nothing: a
     * call that throws leaves every page mapped, but for the pages a {@link PartialUnmapException} names.
     */
    void unmap(NativeAllocation range, long offset, long length);

    /** Gives the address range back; every page in it must have been unmapped. */
    void release(NativeAllocation range);
}
