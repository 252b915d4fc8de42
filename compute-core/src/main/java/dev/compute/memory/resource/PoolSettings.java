package dev.compute.memory.resource;

/**
 * The caching pool's settings for one location: the cap on reserved bytes, the cached bytes a trim keeps,
 * whether to use expandable segments where the backend can map pages, and the property that set the cap (its
 * out-of-memory messages name it).
 */
public record PoolSettings(long maxPoolSize, long releaseThreshold, boolean expandableSegments, String maxPoolSizeProperty) {

    /** Settings whose cap is {@code compute.memory.pooling.max-pool-size}. */
    public PoolSettings(long maxPoolSize, long releaseThreshold, boolean expandableSegments) {
        this(maxPoolSize, releaseThreshold, expandableSegments, "compute.memory.pooling.max-pool-size");
    }

    public PoolSettings {
        if (maxPoolSize <= 0) {
            throw new IllegalArgumentException("maxPoolSize must be positive: " + maxPoolSize);
        }
        if (releaseThreshold < 0) {
            throw new IllegalArgumentException("releaseThreshold must not be negative: " + releaseThreshold);
        }
    }
}
