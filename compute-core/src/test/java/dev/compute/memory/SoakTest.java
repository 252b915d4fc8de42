package dev.compute.memory;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import dev.compute.memory.testing.SoakRun;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/**
 * The soak on the simulated discrete device (every copy a real transfer between separate memories). Bounded:
 * {@code -Dcompute.soak.seconds=N} makes it longer (default 5 here; the CPU backend's soak runs a minute).
 */
class SoakTest {

    @Test
    void threadsMixingSizesLocationsCopiesAndOpsKeepThePoolWhole() throws Exception {
        long seconds = Long.getLong("compute.soak.seconds", 5);
        SimulatedDiscreteBackend device = new SimulatedDiscreteBackend(2L << 30);
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(device)
                .leakDetection(LeakDetectionLevel.SIMPLE).trimInterval(Duration.ofMillis(300)).build()) {
            SoakRun.Report report = SoakRun.run(manager, 3, Duration.ofSeconds(seconds), 1000, 2026);
            System.out.println(report);
            assertThat(report.operations()).as("operations before the soak gave up").isGreaterThanOrEqualTo(1000);
            assertThat(report.structureChecks()).isPositive();
        }
        assertThat(device.liveAllocations()).isZero();
    }
}
