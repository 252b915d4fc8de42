package dev.compute.memory.resource;

import java.util.concurrent.CompletableFuture;

/**
 * An allocator of one location's memory, in the manner of RMM's {@code device_memory_resource}: allocate,
 * deallocate, close, nothing else. Adaptors wrap an upstream resource and add one concern each (figures, a
 * limit, a callback on out-of-memory); what a resource can report about the memory it holds is
 * {@link InspectableResource}. Every resource in this package is thread-safe.
 *
 * <p>After {@link #close()}, {@link #allocate} throws {@link IllegalStateException} and {@link #deallocate} does
 * nothing (the memory is gone already).
 */
public interface MemoryResource extends AutoCloseable {

    /**
     * A block of at least {@code bytes} bytes ({@code bytes > 0}). Throws
     * {@link dev.compute.memory.DeviceOutOfMemoryException} when there is no memory for it.
     */
    Block allocate(long bytes);

    /**
     * Gives a block back. {@code inFlight} is device work still using the block (a kernel, an async copy): the
     * memory must not be handed out again before it completes. Throws {@link IllegalArgumentException} for a
     * block this resource (or its upstream) did not hand out, or one given back already.
     */
    void deallocate(Block block, CompletableFuture<?> inFlight);

    /** Gives back a block no device work uses. */
    default void deallocate(Block block) {
        deallocate(block, NothingInFlight.FUTURE);
    }

    /**
     * Gives back everything this resource holds, and closes its upstream. Memory that device work may still use
     * is waited for at most the device wait timeout, then kept rather than freed under the work.
     */
    @Override
    void close();
}
