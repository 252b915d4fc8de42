package dev.compute.memory.lifetime;

import org.jspecify.annotations.Nullable;

/**
 * What a slice is a range of: the root that owns the memory, where in it the slice starts, and the slice it was cut
 * from (if any). Its views are ranges of its root's views, so it names none of its own.
 */
record SliceOf(BufferCore root, long byteOffset, @Nullable BufferCore parent) {

    /** The slice of {@code cutFrom} (a root or a slice) at {@code byteOffset} of the root. */
    static SliceOf cut(BufferCore cutFrom, long byteOffset) {
        return cutFrom.isSlice() ? new SliceOf(cutFrom.root(), byteOffset, cutFrom) : new SliceOf(cutFrom, byteOffset, null);
    }

    /** The slice's extent, for messages: its size and where it lies in its root. */
    String extent(long byteSize) {
        return byteSize + " bytes at " + byteOffset + " of " + root.byteSize;
    }
}
