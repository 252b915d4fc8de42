package dev.compute.memory.resource;

/**
 * The caching pool's settings for one location: the cap on reserved bytes, the cached bytes a trim keeps,
 * and whether to use expandable segments where the backend can map pages.
 */
public record PoolSettings(long maxPoolSize, long releaseThreshold, boolean expandableSegments) {

    public PoolSettings {
        if (maxPoolSize <= 0) {
            throw new IllegalArgumentException("maxPoolSize must be positive: " + maxPoolSize);
        }
        if (releaseThreshold < 0) {
            throw new IllegalArgumentException("releaseThreshold must not be negative: " + releaseThreshold);
        }
    }
}
