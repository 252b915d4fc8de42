package dev.compute.memory;

import java.time.Duration;
import java.util.Map;

/**
 * The settings a manager runs with, as resolved at start: what the user set, and the defaults for what they did
 * not (a release threshold that follows the cap, the backend {@code auto} chose). What the endpoint shows and
 * what a user checks after a YAML change.
 */
public record ManagerSettings(
        String backend, int device, Map<String, String> backendOptions,
        MemoryLocation defaultLocation, boolean poolingEnabled,
        long maxPoolSize, long releaseThreshold, Duration trimInterval, boolean expandableSegments,
        boolean pinningEnabled, long maxPinnedSize, long stagingBufferSize,
        LeakDetectionLevel leakDetection, int timelineCapacity, Duration timelineInterval,
        Duration closeTimeout, Duration deviceWaitTimeout, int outOfMemoryRetries, boolean allocationRecording) {

    public ManagerSettings {
        backendOptions = Map.copyOf(backendOptions);
    }

    /** The most a location may reserve: max-pinned-size for PINNED, max-pool-size elsewhere. */
    public long capOf(MemoryLocation location) {
        return location == MemoryLocation.PINNED ? maxPinnedSize : maxPoolSize;
    }

    /** The property that sets {@link #capOf}, for messages. */
    public static String capPropertyOf(MemoryLocation location) {
        return location == MemoryLocation.PINNED ? "compute.memory.pinning.max-pinned-size" : "compute.memory.pooling.max-pool-size";
    }
}
