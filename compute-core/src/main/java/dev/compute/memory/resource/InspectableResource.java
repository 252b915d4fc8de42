package dev.compute.memory.resource;

import dev.compute.memory.MemorySnapshot;
import java.util.List;

/**
 * What a resource that holds memory from below (the caching pool, the backend's resource) can report and give
 * back, apart from the allocation contract of {@link MemoryResource}. Reading never changes what the resource
 * holds: no cached block is flushed, no completion drained.
 */
public interface InspectableResource {

    /** Bytes held from below now: plain segments plus mapped pages. */
    long reservedBytes();

    /** The most {@link #reservedBytes()} has been. */
    long reservedBytesPeak();

    /** Segments and reserved ranges held. */
    int segmentCount();

    /**
     * The largest piece of memory held and free that a request under no budget's reservation can take without a call
     * below; 0 where nothing is cached.
     */
    long largestFreeBlockBytes();

    /** Memory held and free that only requests under budgets' reservations can take: none where nothing reserves. */
    default long reservationsCachedBytes() {
        return 0;
    }

    /** The segments and their blocks as they are, for the snapshot and the memory map. */
    List<MemorySnapshot.Segment> segments();

    /** Gives cached memory back until at most {@code keepBytes} stay cached; returns the bytes released. */
    long trim(long keepBytes);
}
