package dev.compute.memory;

import org.jspecify.annotations.Nullable;

/** A buffer still open: its location, size and, where leak detection recorded it, where it was allocated. */
public record LiveBufferReport(MemoryLocation location, long sizeBytes, @Nullable String allocationSite) {}
