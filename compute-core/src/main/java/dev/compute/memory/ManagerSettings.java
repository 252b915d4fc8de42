package dev.compute.memory;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * The settings a manager runs with, as resolved at start: what the user set, and the defaults for what they did
 * not (a release threshold that follows the cap, the backend {@code auto} chose). What the endpoint shows and
 * what a user checks after a YAML change.
 *
 * @param name             what the log calls the manager ({@code default} unless given; the starter gives the name under
 *                         {@code compute.managers}), so that the reports of several managers tell them apart
 * @param maxPoolSize      the cap in bytes, resolved from a share of the device's memory where one was given
 * @param maxPoolSizeShare the share of the device's total memory {@code maxPoolSize} was resolved from (0.8 for
 *                         {@code 80%}); null where the cap was given in bytes
 * @param compactionInterval how often every location is compacted; zero: only when asked
 * @param compactOnOutOfMemory whether an allocation that finds no memory compacts its location and tries once more
 * @param warmup           the blocks each location reserved and cached at start; empty without a warm-up
 * @param heldMemoryWarning how long a closed buffer's memory may wait for views or accesses before the log names
 *                         their threads, and views outside any view scope keep only its range, its pages given back;
 *                         zero: never
 */
public record ManagerSettings(
        String name, String backend, int device, Map<String, String> backendOptions,
        MemoryLocation defaultLocation, boolean poolingEnabled,
        long maxPoolSize, @Nullable Double maxPoolSizeShare, long releaseThreshold, Duration trimInterval,
        Duration compactionInterval, boolean compactOnOutOfMemory, boolean expandableSegments, Map<MemoryLocation, List<WarmupBlocks>> warmup,
        boolean pinningEnabled, long maxPinnedSize, long stagingBufferSize,
        LeakDetectionLevel leakDetection, int timelineCapacity, Duration timelineInterval,
        Duration closeTimeout, Duration deviceWaitTimeout, Duration heldMemoryWarning, int outOfMemoryRetries, int maxOpenMappedFiles,
        boolean allocationRecording) {

    public ManagerSettings {
        backendOptions = Map.copyOf(backendOptions);
        warmup = Map.copyOf(warmup);
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
