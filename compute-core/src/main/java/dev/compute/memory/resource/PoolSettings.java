package dev.compute.memory.resource;

import java.time.Duration;

/**
 * The caching pool's settings for one location: the cap on reserved bytes, the cached bytes a trim keeps,
 * whether to use expandable segments where the backend can map pages, and how long to wait for device work that
 * blocks freed under it still wait on (under memory pressure, and when closing).
 */
public record PoolSettings(long maxPoolSize, long releaseThreshold, boolean expandableSegments, Duration deviceWaitTimeout) {

    /** {@code compute.memory.device-wait-timeout}'s default. */
    public static final Duration DEFAULT_DEVICE_WAIT_TIMEOUT = Duration.ofSeconds(60);

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

    /** With the default wait for device work. */
    public PoolSettings(long maxPoolSize, long releaseThreshold, boolean expandableSegments) {
        this(maxPoolSize, releaseThreshold, expandableSegments, DEFAULT_DEVICE_WAIT_TIMEOUT);
    }
}
