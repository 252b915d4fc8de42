package dev.compute.benchmarks;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/** The budget-pair-cpu command's figures and line, and its refusals of a wrong command line. */
class BudgetPairCpuTimeTest {

    @Test
    void aShortRunTimesEveryPathAndPrintsItsRatios() {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        PrintStream quiet = new PrintStream(new ByteArrayOutputStream(), true, StandardCharsets.UTF_8);

        assertThat(BudgetPairCpuTime.run(new String[] {"1000", "2"}, new PrintStream(out, true, StandardCharsets.UTF_8), quiet)).isZero();
        assertThat(out.toString(StandardCharsets.UTF_8)).matches(
                "budget-pair-cpu manager=[0-9.]+ budget=[0-9.]+ child=[0-9.]+ budget/manager=[0-9.]+ child/manager=[0-9.]+\\R");
    }

    @Test
    void aWrongCommandLineIsRefused() {
        PrintStream quiet = new PrintStream(new ByteArrayOutputStream(), true, StandardCharsets.UTF_8);

        assertThat(BudgetPairCpuTime.run(new String[] {"1000"}, System.out, quiet)).isEqualTo(2);
        assertThat(BudgetPairCpuTime.run(new String[] {"1000", "1"}, System.out, quiet)).as("one round is only the warm-up").isEqualTo(2);
        assertThat(BudgetPairCpuTime.run(new String[] {"0", "3"}, System.out, quiet)).isEqualTo(2);
    }
}
