package dev.compute.memory.resource;

import java.time.Duration;

/**
 * The caching pool's settings for one location: the cap on reserved bytes, the cached bytes a trim keeps,
 * whether to use expandable segments where the backend can map pages, the property that set the cap (its
 * out-of-memory messages name it), and how long to wait for device work that blocks freed under it still wait on
 * (under memory pressure, and when closing).
 */
public record PoolSettings(long maxPoolSize, long releaseThreshold, boolean expandableSegments, String maxPoolSizeProperty,
                           Duration deviceWaitTimeout) {

    /** {@code compute.memory.device-wait-timeout}'s default. */
    public static final Duration DEFAULT_DEVICE_WAIT_TIMEOUT = Duration.ofSeconds(60);
    private static final String MAX_POOL_SIZE = "compute.memory.pooling.max-pool-size";

    public PoolSettings {
        if (maxPoolSize <= 0) {
            throw new IllegalArgumentException("maxPoolSize must be positive: " + maxPoolSize);
        }
        if (releaseThreshold < 0) {
            throw new IllegalArgumentException("releaseThreshold must not be negative: " + releaseThreshold);
        }
        if (deviceWaitTimeout.isNegative() || deviceWaitTimeout.isZero()) {
            throw new IllegalArgumentException("deviceWaitTimeout must be positive: " + deviceWaitTimeout);
        }
    }

    /** Settings whose cap is {@code compute.memory.pooling.max-pool-size}, with the default wait for device work. */
    public PoolSettings(long maxPoolSize, long releaseThreshold, boolean expandableSegments) {
        this(maxPoolSize, releaseThreshold, expandableSegments, MAX_POOL_SIZE, DEFAULT_DEVICE_WAIT_TIMEOUT);
    }

    /** Settings whose cap is set by {@code maxPoolSizeProperty}, with the default wait for device work. */
    public PoolSettings(long maxPoolSize, long releaseThreshold, boolean expandableSegments, String maxPoolSizeProperty) {
        this(maxPoolSize, releaseThreshold, expandableSegments, maxPoolSizeProperty, DEFAULT_DEVICE_WAIT_TIMEOUT);
    }

    /** Settings whose cap is {@code compute.memory.pooling.max-pool-size}, waiting {@code deviceWaitTimeout} for device work. */
    public PoolSettings(long maxPoolSize, long releaseThreshold, boolean expandableSegments, Duration deviceWaitTimeout) {
        this(maxPoolSize, releaseThreshold, expandableSegments, MAX_POOL_SIZE, deviceWaitTimeout);
    }
}
