package dev.compute.memory.cpu;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.spi.BackendSettings;
import dev.compute.memory.testing.SoakRun;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/**
 * The soak on the real CPU backend (its pool maps and unmaps pages with mmap): a minute by default, as in CI;
 * {@code ./mvnw verify -Dcompute.soak.seconds=600} runs it longer.
 */
class CpuSoakTest {

    @Test
    void aMinuteOfMixedLoadLeavesNothingBehind() throws Exception {
        long seconds = Long.getLong("compute.soak.seconds", 60);
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder()
                .backend(new CpuBackendProvider().create(BackendSettings.ofDevice(0)))
                .leakDetection(LeakDetectionLevel.SIMPLE).trimInterval(Duration.ofSeconds(1)).build()) {
            SoakRun.Report report = SoakRun.run(manager, 3, Duration.ofSeconds(seconds), 10_000, 25);
            System.out.println(report);
            assertThat(report.operations()).as("operations before the soak gave up").isGreaterThanOrEqualTo(10_000);
        }
    }
}
