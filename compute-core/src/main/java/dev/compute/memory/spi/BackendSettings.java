package dev.compute.memory.spi;

import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * What a provider is opened with: the device index, whether it may page-lock host memory (for {@code PINNED}
 * buffers and its own staging buffers), the size of one staging buffer for copies from pageable memory, and
 * backend-specific options (for OpenCL: {@code platform}, {@code device-type}; each backend documents its keys).
 */
public record BackendSettings(int deviceIndex, boolean pinningEnabled, long stagingBufferBytes, Map<String, String> options) {

    public static final long DEFAULT_STAGING_BUFFER_BYTES = 16L << 20;

    public BackendSettings {
        if (deviceIndex < 0) {
            throw new IllegalArgumentException("device index must not be negative: " + deviceIndex);
        }
        if (stagingBufferBytes <= 0) {
            throw new IllegalArgumentException("staging buffer size must be positive: " + stagingBufferBytes);
        }
        options = Map.copyOf(options);
    }

    public static BackendSettings ofDevice(int deviceIndex) {
        return new BackendSettings(deviceIndex, true, DEFAULT_STAGING_BUFFER_BYTES, Map.of());
    }

    public @Nullable String option(String key) {
        return options.get(key);
    }
}
