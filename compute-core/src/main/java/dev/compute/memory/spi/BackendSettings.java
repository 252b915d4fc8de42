package dev.compute.memory.spi;

import java.time.Duration;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * What a provider is opened with: the device index, whether it may page-lock host memory (for {@code PINNED}
 * buffers and its own staging buffers), the size of one staging buffer for copies from pageable memory,
 * backend-specific options (for OpenCL: {@code platform}, {@code device-type}; each backend documents its keys), and
 * how long the backend's own calls may wait for device work queued before them ({@code compute.memory.device-wait-timeout}).
 */
public record BackendSettings(int deviceIndex, boolean pinningEnabled, long stagingBufferBytes, Map<String, String> options,
                              Duration deviceWaitTimeout) {

    public static final long DEFAULT_STAGING_BUFFER_BYTES = 16L << 20;
    /** The manager's default device wait ({@code compute.memory.device-wait-timeout}). */
    public static final Duration DEFAULT_DEVICE_WAIT_TIMEOUT = Duration.ofSeconds(60);

    public BackendSettings {
        if (deviceIndex < 0) {
            throw new IllegalArgumentException("device index must not be negative: " + deviceIndex);
        }
        if (stagingBufferBytes <= 0) {
            throw new IllegalArgumentException("staging buffer size must be positive: " + stagingBufferBytes);
        }
        options = Map.copyOf(options);
        if (deviceWaitTimeout.isNegative() || deviceWaitTimeout.isZero()) {
            throw new IllegalArgumentException("the device wait must be positive: " + deviceWaitTimeout);
        }
    }

    /** With the default device wait. */
    public BackendSettings(int deviceIndex, boolean pinningEnabled, long stagingBufferBytes, Map<String, String> options) {
        this(deviceIndex, pinningEnabled, stagingBufferBytes, options, DEFAULT_DEVICE_WAIT_TIMEOUT);
    }

    public static BackendSettings ofDevice(int deviceIndex) {
        return new BackendSettings(deviceIndex, true, DEFAULT_STAGING_BUFFER_BYTES, Map.of());
    }

    public @Nullable String option(String key) {
        return options.get(key);
    }
}
