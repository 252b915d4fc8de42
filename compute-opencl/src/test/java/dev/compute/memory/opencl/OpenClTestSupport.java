package dev.compute.memory.opencl;

import static org.assertj.core.api.Assertions.fail;

import dev.compute.memory.spi.BackendAvailability;
import dev.compute.memory.spi.BackendSettings;
import java.util.Map;
import org.junit.jupiter.api.Assumptions;

/**
 * Where the OpenCL tests run: on any machine with a platform and a device. Without one (a laptop with no ICD
 * loader or driver) they skip with the provider's reason; in CI, which installs PoCL ({@code .ci/run}) and
 * sets {@code CI}, a missing platform fails them instead, so no test is skipped there unnoticed.
 */
final class OpenClTestSupport {
    private OpenClTestSupport() {}

    static BackendSettings settings(Map<String, String> options) {
        return new BackendSettings(0, true, BackendSettings.DEFAULT_STAGING_BUFFER_BYTES, options);
    }

    static BackendSettings defaultSettings() {
        return settings(Map.of());
    }

    static void requireOpenCl() {
        BackendAvailability availability = new OpenClBackendProvider().availability(defaultSettings());
        if (availability.available()) {
            return;
        }
        if (System.getenv("CI") != null) {
            fail("CI installs PoCL, so an OpenCL device must be found there, but: " + availability.detail());
        }
        Assumptions.abort("no OpenCL device here: " + availability.detail());
    }

    static OpenClBackend openBackend(BackendSettings settings) {
        requireOpenCl();
        return (OpenClBackend) new OpenClBackendProvider().create(settings);
    }
}
