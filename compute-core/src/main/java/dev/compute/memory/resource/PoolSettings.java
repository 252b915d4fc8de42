package dev.compute.memory.resource;

import java.time.Duration;

/**
 * How a caching pool gets its memory: in expandable ranges with pages mapped on demand (where the backend maps
 * pages), or in plain segments; and how long it waits for device work that blocks freed under it still wait on
 * (under memory pressure, and when closing). The cap is its upstream's ({@link BackendResource#limitBytes()}).
 */
public record PoolSettings(Layout layout, Duration deviceWaitTimeout) {

    /**
     * The least a pool's cap may be: the least a block over 1 MiB takes from below (a plain segment of whole 2 MiB, or
     * a chunk of pages), so that under a smaller cap none could ever be had.
     */
    public static final long MIN_CAP_BYTES = 2L << 20;

    /** {@code compute.memory.device-wait-timeout}'s default. */
    public static final Duration DEFAULT_DEVICE_WAIT_TIMEOUT = Duration.ofSeconds(60);

    /** Where the pool's memory comes from. */
    public enum Layout {
        /** Reserved ranges whose pages are mapped as blocks need them, where the backend maps pages; else plain segments. */
        EXPANDABLE_SEGMENTS,
        /** Plain segments from the backend's allocate, always. */
        PLAIN_SEGMENTS
    }

    public PoolSettings {
        if (deviceWaitTimeout.isNegative() || deviceWaitTimeout.isZero()) {
            throw new IllegalArgumentException("deviceWaitTimeout must be positive: " + deviceWaitTimeout);
        }
    }

    /** Expandable segments where the backend maps pages, the default wait for device work. */
    public static PoolSettings expandable() {
        return new PoolSettings(Layout.EXPANDABLE_SEGMENTS, DEFAULT_DEVICE_WAIT_TIMEOUT);
    }

    /** Plain segments, the default wait for device work. */
    public static PoolSettings plainSegments() {
        return new PoolSettings(Layout.PLAIN_SEGMENTS, DEFAULT_DEVICE_WAIT_TIMEOUT);
    }

    public PoolSettings withDeviceWaitTimeout(Duration timeout) {
        return new PoolSettings(layout, timeout);
    }
}
