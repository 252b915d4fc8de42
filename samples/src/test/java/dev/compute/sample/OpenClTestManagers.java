package dev.compute.sample;

import static org.assertj.core.api.Assertions.fail;

import dev.compute.memory.BackendUnavailableException;
import dev.compute.memory.UnifiedMemoryManager;
import java.time.Duration;
import org.junit.jupiter.api.Assumptions;

/** A manager on OpenCL for the sample's kernel tests: PoCL in CI (which installs it and sets {@code CI}); a skip elsewhere. */
final class OpenClTestManagers {

    private OpenClTestManagers() {}

    static UnifiedMemoryManager openClManager() {
        try {
            return UnifiedMemoryManager.builder().backend("opencl").timelineInterval(Duration.ZERO).build();
        } catch (BackendUnavailableException e) {
            if (System.getenv("CI") != null) {
                fail("CI installs PoCL, so an OpenCL device must be found there, but: " + e.reason());
            }
            Assumptions.abort("no OpenCL device here: " + e.reason());
            throw e;
        }
    }
}
