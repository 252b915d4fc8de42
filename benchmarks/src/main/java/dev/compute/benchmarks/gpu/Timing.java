package dev.compute.benchmarks.gpu;

import java.util.Arrays;

/** Times the GPU benchmark's operations: the median of a few rounds, after a warm-up round. */
final class Timing {

    /** Rounds per figure; the median is reported, so one disturbed round does not move it. */
    static final int ROUNDS = 5;

    private Timing() {}

    /** Nanoseconds per call of {@code pair}, {@code iterations} calls per round; {@code after} runs inside the timed region once per round (a stream sync). */
    static double nanosPerCall(int iterations, Runnable pair, Runnable after) {
        double[] rounds = new double[ROUNDS];
        for (int round = -1; round < ROUNDS; round++) {
            long start = System.nanoTime();
            for (int i = 0; i < iterations; i++) {
                pair.run();
            }
            after.run();
            long elapsed = System.nanoTime() - start;
            if (round >= 0) {
                rounds[round] = (double) elapsed / iterations;
            }
        }
        return median(rounds);
    }

    /** Nanoseconds per call of {@code pair}, timed call by call, with {@code untimed} before each (emptying a cache). */
    static double nanosPerCallEach(int iterations, Runnable untimed, Runnable pair) {
        double[] rounds = new double[ROUNDS];
        for (int round = -1; round < ROUNDS; round++) {
            long total = 0;
            for (int i = 0; i < iterations; i++) {
                untimed.run();
                long start = System.nanoTime();
                pair.run();
                total += System.nanoTime() - start;
            }
            if (round >= 0) {
                rounds[round] = (double) total / iterations;
            }
        }
        return median(rounds);
    }

    /** Gigabytes (10^9 bytes) per second of {@code copy}, which moves {@code bytes} bytes and returns when they have landed. */
    static double gigabytesPerSecond(long bytes, int copiesPerRound, Runnable copy) {
        double nanosPerCopy = nanosPerCall(copiesPerRound, copy, () -> { });
        return bytes / nanosPerCopy;
    }

    private static double median(double[] values) {
        double[] sorted = values.clone();
        Arrays.sort(sorted);
        return sorted[sorted.length / 2];
    }
}
