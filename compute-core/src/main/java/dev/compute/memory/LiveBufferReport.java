package dev.compute.memory;

import java.nio.file.Path;
import org.jspecify.annotations.Nullable;

/**
 * A buffer still open: its location, size and, where leak detection recorded it, where it was allocated; for a
 * buffer over a mapped file ({@link UnifiedMemoryManager#mapFile}), the file, whose bytes are not in the location's
 * pool figures ({@link MappedFileStatistics} counts them).
 */
public record LiveBufferReport(MemoryLocation location, long sizeBytes, @Nullable String allocationSite, @Nullable Path mappedFile) {

    /** A pooled buffer's report. */
    public LiveBufferReport(MemoryLocation location, long sizeBytes, @Nullable String allocationSite) {
        this(location, sizeBytes, allocationSite, null);
    }
}
