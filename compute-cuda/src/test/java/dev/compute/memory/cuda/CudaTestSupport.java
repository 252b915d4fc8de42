package dev.compute.memory.cuda;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.UnifiedMemoryManagerBuilder;
import dev.compute.memory.spi.BackendAvailability;
import dev.compute.memory.spi.BackendSettings;
import java.time.Duration;
import java.util.Map;

/** Opens the CUDA backend for a test, or skips it with the provider's reason where there is no usable GPU. */
final class CudaTestSupport {
    private CudaTestSupport() {}

    /** Small staging buffers of an odd size, so modest copies already take many chunks that do not divide them. */
    static final long ODD_STAGING_BYTES = (1L << 20) + 4099;

    static void assumeCuda(BackendSettings settings) {
        BackendAvailability availability = new CudaBackendProvider().availability(settings);
        assumeTrue(availability.available(), () -> "no CUDA here: " + availability.detail());
    }

    static CudaBackend openBackend(BackendSettings settings) {
        assumeCuda(settings);
        return (CudaBackend) new CudaBackendProvider().create(settings);
    }

    static CudaBackend openBackend() {
        return openBackend(BackendSettings.ofDevice(0));
    }

    static BackendSettings oddStaging() {
        return new BackendSettings(0, true, ODD_STAGING_BYTES, Map.of());
    }

    /** A manager on a backend the test opened (the manager closes it). */
    static UnifiedMemoryManagerBuilder managerOn(CudaBackend backend) {
        return UnifiedMemoryManager.builder().backend(backend).leakDetection(LeakDetectionLevel.PARANOID)
                .timelineInterval(Duration.ZERO).trimInterval(Duration.ZERO);
    }
}
