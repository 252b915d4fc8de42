package dev.compute.memory.internal;

import java.util.concurrent.ThreadLocalRandom;

/**
 * Which stripe of a per-thread-striped structure the calling thread uses. A thread starts on the stripe its id
 * picks (consecutive ids, as a pool's threads usually have, get different stripes), as Netty's thread caches
 * and HikariCP's thread-local lists pick theirs. Ids can still collide, and two busy threads on one stripe
 * write the same cache lines on every call (pairs several times slower); so whoever finds this thread's stripe
 * in use by another (the manager does, on entering a call) calls {@link #contended()}, which moves the thread
 * to another stripe at random, as a {@link java.util.concurrent.atomic.LongAdder} moves a thread to another
 * cell. Every striped structure reads the same mapping, so one move separates the threads everywhere.
 */
public final class ThreadStripes {

    /** A power of two from two to four times the processors (more stripes than threads at work: fewer collisions), at most 64. */
    public static final int COUNT = Math.min(64, Integer.highestOneBit(Math.max(1, Runtime.getRuntime().availableProcessors()) * 4 - 1));

    /** Threads are mapped to stripes through their id's bucket; a move remaps the bucket. */
    private static final int BUCKETS = 1024;

    /**
     * The stripe of each bucket. Plain ints, read on every call and written only on a move: a thread that reads
     * a stale stripe just uses it a little longer, which is harmless.
     */
    private static final int[] STRIPE_OF_BUCKET = new int[BUCKETS];

    static {
        for (int bucket = 0; bucket < BUCKETS; bucket++) {
            STRIPE_OF_BUCKET[bucket] = bucket & (COUNT - 1);
        }
    }

    private ThreadStripes() {}

    /** The calling thread's stripe, 0 to {@link #COUNT} − 1. */
    public static int ofCurrentThread() {
        return of(Thread.currentThread().threadId());
    }

    /** The stripe of the thread whose {@link Thread#threadId()} is {@code threadId}, for a caller that has the id already. */
    public static int of(long threadId) {
        return STRIPE_OF_BUCKET[bucketOf(threadId)];
    }

    /** Moves the calling thread to another stripe, chosen at random so that two colliding threads do not move in step. */
    public static void contended() {
        if (COUNT > 1) {
            int bucket = bucketOfCurrentThread();
            int step = 1 + ThreadLocalRandom.current().nextInt(COUNT - 1);
            STRIPE_OF_BUCKET[bucket] = (STRIPE_OF_BUCKET[bucket] + step) & (COUNT - 1);
        }
    }

    private static int bucketOfCurrentThread() {
        return bucketOf(Thread.currentThread().threadId());
    }

    private static int bucketOf(long threadId) {
        return (int) threadId & (BUCKETS - 1);
    }
}
