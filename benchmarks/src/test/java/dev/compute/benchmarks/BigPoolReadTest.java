package dev.compute.benchmarks;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/** The big-pool read on a small pool: it reads every block, hears the pool's snapshot events, and refuses what it does not know. */
class BigPoolReadTest {

    @Test
    void readsEveryBlockAndReportsThePoolsHolds() {
        ByteArrayOutputStream out = new ByteArrayOutputStream();

        int status = BigPoolRead.run(new String[] {"--live", "500", "--reads", "2"}, new PrintStream(out, true, StandardCharsets.UTF_8), System.err);

        String line = out.toString(StandardCharsets.UTF_8);
        assertThat(status).isZero();
        assertThat(line).startsWith("big-pool-read live_blocks=500 ")
                .contains(" blocks_in_view=1001 ") // 500 live, 500 freed between them, and the free rest of the range
                .containsPattern(" longest_hold_us_median=\\d+ longest_hold_us_max=\\d+ holds_per_read=\\d+ ");
    }

    @Test
    void refusesAnArgumentItDoesNotKnow() {
        ByteArrayOutputStream err = new ByteArrayOutputStream();

        assertThat(BigPoolRead.run(new String[] {"--frobnicate"}, System.out, new PrintStream(err, true, StandardCharsets.UTF_8))).isEqualTo(2);
        assertThat(err.toString(StandardCharsets.UTF_8)).contains("usage: big-pool-read");
    }

    @Test
    void refusesACountThatIsMissingOrNotPositive() {
        for (String[] args : new String[][] {{"--live", "-5"}, {"--live", "0"}, {"--reads", "0"}, {"--reads", "many"}, {"--live"}}) {
            ByteArrayOutputStream err = new ByteArrayOutputStream();

            assertThat(BigPoolRead.run(args, System.out, new PrintStream(err, true, StandardCharsets.UTF_8))).as(String.join(" ", args)).isEqualTo(2);
            assertThat(err.toString(StandardCharsets.UTF_8)).startsWith("big-pool-read: " + args[0] + " needs a count of 1 or more")
                    .contains("usage: big-pool-read");
        }
    }
}
