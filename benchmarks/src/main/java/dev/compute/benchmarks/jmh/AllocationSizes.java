package dev.compute.benchmarks.jmh;

import java.util.SplittableRandom;

/**
 * The request sizes every allocate+free benchmark uses, so that our pool and its peers see the same stream.
 * Same size: {@value #SAME_SIZE} bytes, over and over. Mixed sizes: {@value #MIXED_COUNT} sizes drawn once, with a
 * fixed seed, log-uniformly between {@value #MIXED_MIN} bytes and {@value #MIXED_MAX} bytes (every size class
 * is as likely as every other, as in a service that handles small and large requests), walked in a cycle.
 */
final class AllocationSizes {

    static final long SAME_SIZE = 4096;
    static final long MIXED_MIN = 256;
    static final long MIXED_MAX = 256 * 1024;
    static final int MIXED_COUNT = 1024;
    private static final long SEED = 0x5EED_C0DEL;

    private static final long[] MIXED = draw();

    private AllocationSizes() {}

    private static long[] draw() {
        SplittableRandom random = new SplittableRandom(SEED);
        double low = Math.log(MIXED_MIN);
        double high = Math.log(MIXED_MAX);
        long[] sizes = new long[MIXED_COUNT];
        for (int i = 0; i < sizes.length; i++) {
            sizes[i] = Math.round(Math.exp(low + random.nextDouble() * (high - low)));
        }
        return sizes;
    }

    /** The {@code index}-th mixed size; the index wraps around. */
    static long mixed(int index) {
        return MIXED[index & (MIXED_COUNT - 1)];
    }
}
