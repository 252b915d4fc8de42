package dev.compute.benchmarks;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** The reservation-churn figures add up, and the command's line and its refusals of a wrong command line. */
class ReservationChurnTest {

    @Test
    void aShortRunOnTheCpuCountsItsRoundsAndTheNeighboursShare() {
        ReservationChurn.Figures figures = ReservationChurn.measure("cpu", Duration.ofMillis(300));

        assertThat(figures.rounds()).isPositive();
        assertThat(figures.refused()).isBetween(0L, figures.rounds());
        assertThat(figures.neighbourPeakBytes()).as("the books hold the neighbour to the cap less the reservation")
                .isBetween(1L, 32L << 20);
    }

    @Test
    void theCommandPrintsOneLineAndRefusesAWrongOne() {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        PrintStream quiet = new PrintStream(new ByteArrayOutputStream(), true, StandardCharsets.UTF_8);

        assertThat(ReservationChurn.run(new String[] {"cpu", "1"}, new PrintStream(out, true, StandardCharsets.UTF_8), quiet)).isZero();
        assertThat(out.toString(StandardCharsets.UTF_8)).startsWith("reservation-churn backend=cpu rounds=").contains(" refused_share=");
        assertThat(ReservationChurn.run(new String[] {"cpu"}, System.out, quiet)).isEqualTo(2);
        assertThat(ReservationChurn.run(new String[] {"cpu", "0"}, System.out, quiet)).isEqualTo(2);
    }
}
