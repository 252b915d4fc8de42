package dev.compute.memory.cuda;

import static org.assertj.core.api.Assertions.fail;

import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.UnifiedMemoryManagerBuilder;
import dev.compute.memory.spi.BackendAvailability;
import dev.compute.memory.spi.BackendSettings;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Assumptions;

/**
 * Opens the CUDA backend for a test, or skips it with the provider's reason where there is no GPU. Where an NVIDIA
 * driver is installed ({@code /proc/driver/nvidia/version}), or {@value #REQUIRED} asks for CUDA (the GPU machine's
 * runs), a backend that cannot open (a driver older than CUDA 12, {@code cuInit} failing, JCuda's natives not
 * loading) fails the tests instead: a broken GPU setup must not report green skips.
 */
final class CudaTestSupport {
    private CudaTestSupport() {}

    /** The environment variable that makes a machine without a usable CUDA device fail the tests rather than skip them. */
    static final String REQUIRED = "COMPUTE_REQUIRE_CUDA";

    /** Small staging buffers of an odd size, so modest copies already take many chunks that do not divide them. */
    static final long ODD_STAGING_BYTES = (1L << 20) + 4099;

    static void assumeCuda(BackendSettings settings) {
        BackendAvailability availability = new CudaBackendProvider().availability(settings);
        if (availability.available()) {
            return;
        }
        if (System.getenv(REQUIRED) != null) {
            fail(REQUIRED + " is set, so a CUDA device must open here, but: " + availability.detail());
        }
        if (Files.exists(NVIDIA_DRIVER)) {
            fail("an NVIDIA driver is installed (" + NVIDIA_DRIVER + "), so a CUDA device must open here, but: " + availability.detail());
        }
        Assumptions.abort("no CUDA here: " + availability.detail());
    }

    /** What the NVIDIA kernel driver shows once it is loaded. */
    private static final Path NVIDIA_DRIVER = Path.of("/proc/driver/nvidia/version");

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
