package dev.compute.memory.resource;

import dev.compute.memory.MemorySnapshot;
import dev.compute.memory.MemoryStatistics;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * An allocator of one location's memory. Implementations say in their class comment whether they are
 * thread-safe; every one in this package is. After {@link #close()}, {@link #allocate} throws
 * {@link IllegalStateException} and {@link #deallocate} does nothing (the memory is gone already).
 */
public interface MemoryResource extends AutoCloseable {

    /**
     * A block of at least {@code bytes} bytes ({@code bytes > 0}). Throws
     * {@link dev.compute.memory.DeviceOutOfMemoryException} when there is no memory for it.
     */
    Block allocate(long bytes);

    /**
     * Gives a block back. {@code inFlight} is device work still using the block (a kernel, an async copy): the
     * memory must not be handed out again before it completes. Pass a completed future when there is none.
     */
    void deallocate(Block block, CompletableFuture<?> inFlight);

    default void deallocate(Block block) {
        deallocate(block, NothingInFlight.FUTURE);
    }

    /** Gives cached memory back to the backend until at most {@code keepBytes} stay cached; returns the bytes released. */
    long trim(long keepBytes);

    /** Adds this resource's figures (and its upstream's) to {@code into}. */
    void collectStatistics(MemoryStatistics.Builder into);

    /** The segments and blocks this resource holds, for the snapshot and the memory map page. */
    List<MemorySnapshot.Segment> segments();

    /** Frees every segment. Blocks still live are lost to their owners; the manager reports them first. */
    @Override
    void close();
}
