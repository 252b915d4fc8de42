package dev.compute.memory.resource.pool;

/**
 * Size rounding. Every block is a multiple of {@value #ALIGNMENT} bytes (so every block starts aligned for any
 * element type); requests up to {@value #SMALL_LIMIT} bytes are small, the rest large. Plain segments (where
 * the backend cannot map pages) are {@value #SMALL_SEGMENT} bytes for small blocks, {@value #LARGE_SEGMENT}
 * bytes for large requests under {@value #LARGE_SEGMENT_THRESHOLD} bytes, and the request rounded up to
 * {@value #SMALL_SEGMENT} bytes beyond, as PyTorch's allocator does.
 */
final class SizeClasses {

    static final long ALIGNMENT = 512;
    static final long SMALL_LIMIT = 1L << 20;
    static final long SMALL_SEGMENT = 2L << 20;
    static final long LARGE_SEGMENT = 20L << 20;
    static final long LARGE_SEGMENT_THRESHOLD = 10L << 20;
    /** Small size classes: one per multiple of the alignment up to the small limit. */
    static final int SMALL_CLASSES = (int) (SMALL_LIMIT / ALIGNMENT);

    private SizeClasses() {}

    /** The largest request that can be rounded: larger ones are above every limit. */
    static final long LARGEST_ROUNDABLE = Long.MAX_VALUE - ALIGNMENT;

    /** The block size for a request: rounded up to the alignment. */
    static long round(long bytes) {
        if (bytes <= 0) {
            throw new IllegalArgumentException("allocation size must be positive: " + bytes + " bytes");
        }
        if (bytes > LARGEST_ROUNDABLE) {
            throw new IllegalArgumentException("allocation size too large: " + bytes + " bytes");
        }
        return (bytes + ALIGNMENT - 1) & -ALIGNMENT;
    }

    static boolean small(long roundedBytes) {
        return roundedBytes <= SMALL_LIMIT;
    }

    /** The size class of a small rounded size, 0 to {@link #SMALL_CLASSES} − 1. */
    static int smallClass(long roundedBytes) {
        return (int) (roundedBytes / ALIGNMENT) - 1;
    }

    /** The plain segment to allocate for a block; growing exactly, large ones get no slack. */
    static long segmentSize(long roundedBytes, PoolArena.Growth growth) {
        if (small(roundedBytes)) {
            return SMALL_SEGMENT;
        }
        if (roundedBytes < LARGE_SEGMENT_THRESHOLD && growth == PoolArena.Growth.WITH_SLACK) {
            return LARGE_SEGMENT;
        }
        return roundUp(roundedBytes, SMALL_SEGMENT);
    }

    static long roundUp(long bytes, long unit) {
        return Math.ceilDiv(bytes, unit) * unit;
    }
}
