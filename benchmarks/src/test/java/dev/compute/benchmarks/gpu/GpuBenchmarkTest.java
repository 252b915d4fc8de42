package dev.compute.benchmarks.gpu;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** The command line of {@code gpu}, checked before it looks for a device: on any machine. */
class GpuBenchmarkTest {

    @Test
    void aWrongDeviceIndexIsRefusedWithTheUsage() {
        for (String[] args : new String[][] {{"--help"}, {"-1"}, {"first"}, {"0", "1"}}) {
            assertThat(GpuBenchmark.run(args)).as(String.join(" ", args)).isEqualTo(2);
        }
    }
}
