package dev.compute.memory.resource.pool;

/**
 * Size rounding. Every block is a multiple of {@value #ALIGNMENT} bytes (so every block starts aligned for any
 * element type); requests up to {@value #SMALL_LIMIT} bytes are small, the rest large. Plain segments (where
 * the backend cannot map pages) are {@value #LARGE_SEGMENT} bytes for large requests under
 * {@value #LARGE_SEGMENT_THRESHOLD} bytes and the request rounded up to {@value #SMALL_SEGMENT} bytes beyond, as
 * PyTorch's allocator does; small blocks' segments grow with their arena, from {@value #MIN_SMALL_SEGMENT} bytes to
 * {@value #SMALL_SEGMENT}, each at most 1/32 of what the arena's segments hold (and at least the block, in whole
 * {@value #SMALL_SEGMENT_UNIT} bytes): PyTorch's fixed 2 MiB would hold a few small pinned buffers in 2 MiB of locked
 * memory and leave up to 2 MiB unused at any size, where this leaves at most about 3 % of the arena (or one minimal
 * segment) in the last segment's tail, for a few more calls while the arena is small.
 */
final class SizeClasses {

    static final long ALIGNMENT = 512;
    static final long SMALL_LIMIT = 1L << 20;
    static final long SMALL_SEGMENT = 2L << 20;
    static final long MIN_SMALL_SEGMENT = 256L << 10;
    static final long SMALL_SEGMENT_UNIT = 64L << 10;
    /** A small block's new segment is at most what the arena's segments hold, shifted right by this. */
    static final int SMALL_SEGMENT_SHARE_SHIFT = 5;
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

    /**
     * The plain segment to allocate for a block, in an arena whose plain segments hold {@code arenaBytes}; growing
     * exactly, large ones get no slack.
     */
    static long segmentSize(long roundedBytes, PoolArena.Growth growth, long arenaBytes) {
        if (small(roundedBytes)) {
            long grown = Math.clamp(roundUp(arenaBytes >> SMALL_SEGMENT_SHARE_SHIFT, SMALL_SEGMENT_UNIT), MIN_SMALL_SEGMENT, SMALL_SEGMENT);
            return Math.max(roundUp(roundedBytes, SMALL_SEGMENT_UNIT), grown);
        }
        if (roundedBytes < LARGE_SEGMENT_THRESHOLD && growth == PoolArena.Growth.WITH_SLACK) {
            return LARGE_SEGMENT;
        }
        return roundUp(roundedBytes, SMALL_SEGMENT);
    }

    /** The least plain segments take for small blocks of {@code bytes} in all ({@link #segmentSize}'s rule): 0 for none. */
    static long leastSmallSegments(long bytes) {
        return bytes == 0 ? 0 : Math.max(MIN_SMALL_SEGMENT, roundUp(bytes, SMALL_SEGMENT_UNIT));
    }

    static long roundUp(long bytes, long unit) {
        return Math.ceilDiv(bytes, unit) * unit;
    }
}
