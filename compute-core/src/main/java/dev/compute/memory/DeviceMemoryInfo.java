package dev.compute.memory;

/** The device's own view of its memory (for CUDA, {@code cuMemGetInfo}); -1 where a backend cannot tell. */
public record DeviceMemoryInfo(long freeBytes, long totalBytes) {
    public static final DeviceMemoryInfo UNKNOWN = new DeviceMemoryInfo(-1, -1);
}
