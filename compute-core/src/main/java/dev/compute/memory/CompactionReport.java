package dev.compute.memory;

import java.time.Duration;

/**
 * What one {@link UnifiedMemoryManager#compact(MemoryLocation)} did at a location: the buffers whose memory it moved,
 * the movable buffers it left where they were because something held them (an op, a copy, a view, an access, device
 * work), the bytes it gave back, and the figures before and after ({@link MemoryStatistics#fragmentation()}: 0 when all
 * cached memory is one block).
 */
public record CompactionReport(
        MemoryLocation location,
        long buffersMoved, long bytesMoved, long buffersInUse,
        long bytesReleased,
        long reservedBytesBefore, long reservedBytesAfter,
        long largestFreeBlockBytesBefore, long largestFreeBlockBytesAfter,
        double fragmentationBefore, double fragmentationAfter,
        Duration duration) {
}
