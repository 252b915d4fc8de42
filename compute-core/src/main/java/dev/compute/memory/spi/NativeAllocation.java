package dev.compute.memory.spi;

import dev.compute.memory.MemoryLocation;
import java.lang.foreign.MemorySegment;
import org.jspecify.annotations.Nullable;

/**
 * One raw allocation (or reserved virtual range) from a backend. {@code address} is what the backend
 * addresses it by (a host address, a CUDA device pointer); {@code hostSegment} is non-null when the host can
 * read and write it directly; {@code handle} is the backend's own object for it (an OpenCL {@code cl_mem}).
 * The pool carves blocks out of it at offsets; backends receive (allocation, offset) pairs.
 */
public record NativeAllocation(MemoryLocation location, long address, long sizeBytes,
                               @Nullable MemorySegment hostSegment, @Nullable Object handle) {

    public boolean hostAccessible() {
        return hostSegment != null;
    }
}
