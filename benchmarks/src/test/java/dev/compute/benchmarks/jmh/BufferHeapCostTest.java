package dev.compute.benchmarks.jmh;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** The command line of {@code heap-cost}; the measurement itself runs as the README shows. */
class BufferHeapCostTest {

    @Test
    void aWrongCountOrSizeIsRefusedWithTheUsage() {
        for (String[] args : new String[][] {{"--help"}, {"0"}, {"-3"}, {"4096", "0"}, {"4096", "big"}, {"1", "2", "3"}}) {
            assertThat(BufferHeapCost.run(args)).as(String.join(" ", args)).isEqualTo(2);
        }
    }
}
