package dev.compute.memory.resource;

import dev.compute.memory.spi.NativeAllocation;

/**
 * A piece of memory handed out by a {@link MemoryResource}: {@code size} bytes at {@code offset} into a
 * backend allocation (a whole segment, or the reserved range of an expandable one). {@code size} is what
 * the resource set aside (after rounding); {@code requestedSize} is what the caller asked for. Compaction
 * ({@link dev.compute.memory.resource.pool.CachingPoolResource#relocate}) may move a block while nothing uses it:
 * read {@code segment()} and {@code offset()} when the memory is used, do not keep them.
 */
public interface Block {

    NativeAllocation segment();

    long offset();

    long size();

    long requestedSize();
}
