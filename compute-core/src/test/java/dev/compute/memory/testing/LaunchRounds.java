package dev.compute.memory.testing;

import java.util.Arrays;

/**
 * The timing loop of the backends' plain-Java launch timings, for the GPU machine, which has no JMH: a warm-up round,
 * then {@link #ROUNDS} rounds of {@link #LAUNCHES} launches each, and the median printed in microseconds a launch.
 */
public final class LaunchRounds {

    public static final int LAUNCHES = 2_000;
    public static final int ROUNDS = 7;

    private LaunchRounds() {
    }

    /** Times {@code work}, which makes {@code launchesPerRun} launches a run, and prints one line: {@code what}, the median, the spread. */
    public static void report(String what, Runnable work, int launchesPerRun) {
        double[] rounds = new double[ROUNDS];
        for (int round = -1; round < ROUNDS; round++) {
            long start = System.nanoTime();
            for (int i = 0; i < LAUNCHES / launchesPerRun; i++) {
                work.run();
            }
            long elapsed = System.nanoTime() - start;
            if (round >= 0) {
                rounds[round] = elapsed / 1_000.0 / LAUNCHES;
            }
        }
        Arrays.sort(rounds);
        System.out.printf("%-44s %12.2f   (rounds %.2f .. %.2f)%n", what, rounds[ROUNDS / 2], rounds[0], rounds[ROUNDS - 1]);
    }
}
