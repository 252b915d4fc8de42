package dev.compute.benchmarks;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/** The pinned-waste figures on a set small enough to count by hand, and the command's table. */
class PinnedWasteTest {

    private static final long MiB = 1L << 20;

    @Test
    void aSetCountedByHand() {
        PinnedWaste.Row row = PinnedWaste.measure(new PinnedWaste.SizeSet("by hand", new long[] {3 * MiB, 3 * MiB, 15 * MiB + 1}));

        assertThat(row.requested()).isEqualTo(21 * MiB + 1);
        // the two 3 MiB blocks share one 20 MiB segment, whose 14 MiB left cannot hold 15 MiB and a byte: that is a
        // segment of its own, rounded up to 2 MiB
        assertThat(row.poolReserved()).isEqualTo(20 * MiB + 16 * MiB);
        assertThat(row.powerOfTwoReserved()).isEqualTo(4 * MiB + 4 * MiB + 16 * MiB);
        assertThat(row.poolCalls()).isEqualTo(2);
    }

    /**
     * One BERT batch's inputs (batch 8, sequence 128: four int64 tensors of 8 KiB) take a small arena's first segment,
     * 256 KiB, not a 2 MiB one; and every set of the command is within the goal, 1.05 of what it asks.
     */
    @Test
    void oneBatchTakesASmallSegmentAndEverySetIsWithinTheGoal() {
        long tensor = 8L * 8 * 128;
        PinnedWaste.Row batch = PinnedWaste.measure(new PinnedWaste.SizeSet("one batch", new long[] {tensor, tensor, tensor, tensor}));
        assertThat(batch.poolReserved()).isEqualTo(256 * 1024);
        assertThat(batch.poolCalls()).isEqualTo(1);

        for (PinnedWaste.SizeSet set : PinnedWaste.sets()) {
            assertThat(PinnedWaste.measure(set).poolRatio()).as(set.name()).isLessThanOrEqualTo(1.05);
        }
    }

    @Test
    void theCommandPrintsARowPerSet() {
        ByteArrayOutputStream out = new ByteArrayOutputStream();

        assertThat(PinnedWaste.run(new String[0], new PrintStream(out, true, StandardCharsets.UTF_8), System.err)).isZero();
        assertThat(out.toString(StandardCharsets.UTF_8).lines()).hasSize(2 + PinnedWaste.sets().size());
        assertThat(PinnedWaste.run(new String[] {"--what"}, System.out, new PrintStream(new ByteArrayOutputStream(), true, StandardCharsets.UTF_8)))
                .isEqualTo(2);
    }
}
