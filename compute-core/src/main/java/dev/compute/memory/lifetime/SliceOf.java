package dev.compute.memory.lifetime;

import org.jspecify.annotations.Nullable;

/**
 * What a slice is a range of: the root that owns the memory, where in it the slice starts, the slice it was cut from
 * (if any), and the tokens that name its views: its own first, then its ancestors' (tokens, not the slices: open
 * views must not keep a slice, nor its buffer, from being collected).
 */
record SliceOf(BufferCore root, long byteOffset, @Nullable BufferCore parent, Object[] lineage) {

    /** The slice of {@code cutFrom} (a root or a slice) at {@code byteOffset} of the root, with a token of its own. */
    static SliceOf cut(BufferCore cutFrom, long byteOffset) {
        Object @Nullable [] ancestors = cutFrom.lineage();
        if (ancestors == null) {
            return new SliceOf(cutFrom, byteOffset, null, new Object[] {new Object()});
        }
        Object[] lineage = new Object[ancestors.length + 1];
        lineage[0] = new Object();
        System.arraycopy(ancestors, 0, lineage, 1, ancestors.length);
        return new SliceOf(cutFrom.root(), byteOffset, cutFrom, lineage);
    }

    /** The slice's extent, for messages: its size and where it lies in its root. */
    String extent(long byteSize) {
        return byteSize + " bytes at " + byteOffset + " of " + root.byteSize;
    }
}
