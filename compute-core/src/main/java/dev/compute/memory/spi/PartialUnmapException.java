package dev.compute.memory.spi;

import java.util.Arrays;

/**
 * Thrown by {@link VirtualMemory#unmap} when the call failed part way and could not map back every page it had
 * unmapped: those pages are unmapped now, the call's other pages still mapped. Any other exception from an unmap
 * means every page of the call is still mapped.
 */
public class PartialUnmapException extends RuntimeException {

    private final long[] unmappedOffsets;

    /** {@code unmappedOffsets}: where in the range each page now unmapped begins, in bytes. */
    public PartialUnmapException(String message, Throwable cause, long... unmappedOffsets) {
        super(message, cause);
        if (unmappedOffsets.length == 0) {
            throw new IllegalArgumentException("a partial unmap names at least one unmapped page");
        }
        this.unmappedOffsets = unmappedOffsets.clone();
        Arrays.sort(this.unmappedOffsets);
    }

    /** Where in the range each page the failed call left unmapped begins, in bytes, in ascending order. */
    public long[] unmappedOffsets() {
        return unmappedOffsets.clone();
    }
}
