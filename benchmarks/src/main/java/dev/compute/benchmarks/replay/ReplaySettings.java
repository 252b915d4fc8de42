package dev.compute.benchmarks.replay;

import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedMemoryManagerBuilder;
import java.time.Duration;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * The pool settings a replay runs with, named as the manager's properties name them: the caps
 * ({@code compute.memory.pooling.max-pool-size}, and {@code compute.memory.pinning.max-pinned-size} for a trace of
 * PINNED events alone), the release threshold and trim interval (a scheduled trim happens when the trace's time,
 * where it has one, passes each interval), expandable segments, and compaction on out-of-memory
 * ({@code compute.memory.pooling.compact-on-out-of-memory}: a refused allocation moves every large block a compaction
 * would, with no copy, since a replay has no data, and is tried once more). A cap left unset is the device's capacity,
 * since the manager's default (4 GiB) is smaller than a big trace; the rest default as in the manager.
 */
public record ReplaySettings(@Nullable Long maxPoolSize, @Nullable Long maxPinnedSize, @Nullable Long releaseThreshold,
                             Duration trimInterval, boolean expandableSegments, boolean compactOnOutOfMemory) {

    public static ReplaySettings defaults() {
        return new ReplaySettings(null, null, null, UnifiedMemoryManagerBuilder.DEFAULT_TRIM_INTERVAL, true, true);
    }

    /** The cap for a trace of these locations on a device of {@code capacity} bytes. */
    long capFor(List<String> locations, long capacity) {
        Long cap = locations.equals(List.of(MemoryLocation.PINNED.name())) ? maxPinnedSize : maxPoolSize;
        return cap != null ? cap : capacity;
    }

    /** What a trim keeps cached under {@code cap}: the release threshold set, or the manager's default where that fits. */
    long releaseThresholdFor(long cap) {
        return releaseThreshold != null ? releaseThreshold : Math.min(UnifiedMemoryManagerBuilder.DEFAULT_RELEASE_THRESHOLD, cap);
    }

    /** The settings as a comment line of the replayer's output. */
    String describe() {
        return "# settings: max-pool-size=" + (maxPoolSize != null ? maxPoolSize : "the capacity")
                + " max-pinned-size=" + (maxPinnedSize != null ? maxPinnedSize : "the capacity")
                + " release-threshold=" + (releaseThreshold != null ? releaseThreshold : "default (256 MiB, at most the cap)")
                + " trim-interval=" + (trimInterval.isZero() ? "0 (no scheduled trims)" : trimInterval + " of trace time")
                + " expandable-segments=" + expandableSegments + " compact-on-out-of-memory=" + compactOnOutOfMemory;
    }
}
