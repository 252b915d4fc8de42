package dev.compute.memory.resource;

import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.jspecify.annotations.Nullable;

/**
 * An allocator of one location's memory, in the manner of RMM's {@code device_memory_resource}: allocate (a block,
 * or a batch placed together where the resource can), deallocate, close, nothing else. Adaptors wrap an upstream resource and add one concern each (figures, a
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
     * A block for each of {@code bytes} (each {@code > 0}), in that order, placed one after another in memory this
     * resource holds already; or null where it cannot place them so, having allocated nothing and called nothing
     * below. Each block is independent: it is given back alone, as any other. For a batch a caller wants together;
     * the caller allocates one by one on null. The default places nothing together: an adaptor that passes calls
     * through overrides it to pass this one through too.
     */
    default @Nullable List<Block> allocateAdjacent(long[] bytes) {
        return null;
    }

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
