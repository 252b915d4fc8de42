package dev.compute.benchmarks.compaction;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The compaction benchmark on a few buffers: its figures add up, and compaction gives back at least what a trim does. */
class CompactionBenchmarkTest {

    @ParameterizedTest(name = "expandable={0}")
    @ValueSource(booleans = {true, false})
    void compactionGivesBackAtLeastWhatATrimDoesAndKeepsTheData(boolean expandable) {
        CompactionBenchmark.Row trim = CompactionBenchmark.measure("cpu", expandable, CompactionBenchmark.Operation.TRIM, 24, 7);
        CompactionBenchmark.Row compact = CompactionBenchmark.measure("cpu", expandable, CompactionBenchmark.Operation.COMPACT, 24, 7);

        assertThat(trim.dataKept()).isTrue();
        assertThat(compact.dataKept()).isTrue();
        assertThat(compact.before().reservedBytes()).as("the same seed, the same pool").isEqualTo(trim.before().reservedBytes());
        assertThat(compact.after().allocatedBytes()).isEqualTo(trim.after().allocatedBytes());
        assertThat(compact.after().reservedBytes()).isLessThanOrEqualTo(trim.after().reservedBytes());
        assertThat(compact.buffersMoved()).isPositive();
        assertThat(trim.buffersMoved()).isZero();
    }

    @Test
    void theCommandPrintsItsTableAndRefusesWhatItDoesNotKnow() {
        assertThat(CompactionBenchmark.run(new String[] {"--buffers", "8"})).isZero();
        assertThat(CompactionBenchmark.run(new String[] {"--frobnicate"})).isEqualTo(2);
    }

    @Test
    void aWrongNumberOrBackendIsRefusedWithTheUsage() {
        for (String[] args : new String[][] {{"--buffers"}, {"--buffers", "many"}, {"--buffers", "0"}, {"--seed", "x"}, {"--backend", "nosuch"}}) {
            assertThat(CompactionBenchmark.run(args)).as(String.join(" ", args)).isEqualTo(2);
        }
    }
}
