package dev.compute.boot;

import dev.compute.memory.MemoryLocation;
import org.jspecify.annotations.Nullable;

/** {@code compute.memory.default-location}: a {@link MemoryLocation}, or {@code auto} to let the backend choose. */
public enum LocationSetting {
    /** DEVICE on an accelerator, HOST on the CPU backend. */
    AUTO(null),
    /** Accelerator memory. */
    DEVICE(MemoryLocation.DEVICE),
    /** Ordinary off-heap host memory. */
    HOST(MemoryLocation.HOST),
    /** Page-locked host memory. */
    PINNED(MemoryLocation.PINNED),
    /** One address space for host and device. */
    UNIFIED(MemoryLocation.UNIFIED);

    private final @Nullable MemoryLocation location;

    LocationSetting(@Nullable MemoryLocation location) {
        this.location = location;
    }

    /** The location, or {@code null} for auto. */
    public @Nullable MemoryLocation location() {
        return location;
    }
}
