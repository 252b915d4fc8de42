package dev.compute.memory.internal;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * A few long counters, one set per thread stripe ({@link ThreadStripes}), each set on 128 bytes of its own
 * and the whole padded away from the array's header, so that threads counting at once never write a cache
 * line another reads (nor the neighbouring line the CPU prefetches with it), as long as they are on different
 * stripes (see {@link ThreadStripes#contended()} for when they are not). Measured against a
 * {@link java.util.concurrent.atomic.LongAdder}, whose cells (as many as processors, picked by a hash) two
 * threads kept sharing here, this took an allocate+free pair through the manager on two threads from several
 * times the one-thread time to about the same.
 */
public final class StripedLongs {

    /** Longs per stripe: 128 bytes. */
    private static final int STRIDE = 16;

    /** Each long read and written through {@link #CELLS}, with the ordering its method names. */
    private static final VarHandle CELLS = MethodHandles.arrayElementVarHandle(long[].class);

    private final long[] cells = new long[(ThreadStripes.COUNT + 2) * STRIDE];

    /** Room for up to 16 counters per stripe, numbered from 0. */
    public StripedLongs() {}

    /** Adds to counter {@code field} of the calling thread's stripe; returns that stripe's new value. */
    public long add(int field, long delta) {
        return addAt(ThreadStripes.ofCurrentThread(), field, delta);
    }

    /**
     * Adds to counter {@code field} of stripe {@code stripe} (from {@link ThreadStripes#ofCurrentThread()}), as
     * {@link #add} does, for a caller that must add and later subtract in the same stripe.
     */
    public long addAt(int stripe, int field, long delta) {
        return (long) CELLS.getAndAdd(cells, cell(stripe, field), delta) + delta;
    }

    /**
     * Sets counter {@code field} of stripe {@code stripe} to {@code value}, after every write the calling thread made
     * before: for a counter only its owner writes (a release store, no atomic step).
     */
    public void setRelease(int stripe, int field, long value) {
        CELLS.setRelease(cells, cell(stripe, field), value);
    }

    /**
     * Sets counter {@code field} of stripe {@code stripe} to {@code value} without ordering it against other
     * writes: for a counter written by one thread at a time, which hands it on with {@link #setRelease}.
     */
    public void setOpaque(int stripe, int field, long value) {
        CELLS.setOpaque(cells, cell(stripe, field), value);
    }

    /** Counter {@code field} of stripe {@code stripe}. */
    public long get(int stripe, int field) {
        return (long) CELLS.getVolatile(cells, cell(stripe, field));
    }

    /**
     * Sets counter {@code field} of stripe {@code stripe} to {@code value} if it is {@code expected}; returns what
     * it was (the set happened when that is {@code expected}).
     */
    public long compareAndExchange(int stripe, int field, long expected, long value) {
        return (long) CELLS.compareAndExchange(cells, cell(stripe, field), expected, value);
    }

    /** Counter {@code field} summed over the stripes: exact when no thread is adding. */
    public long sum(int field) {
        long sum = 0;
        for (int stripe = 0; stripe < ThreadStripes.COUNT; stripe++) {
            sum += (long) CELLS.getVolatile(cells, cell(stripe, field));
        }
        return sum;
    }

    /** True when counter {@code field} is not zero in some stripe. */
    public boolean anyNonZero(int field) {
        for (int stripe = 0; stripe < ThreadStripes.COUNT; stripe++) {
            if ((long) CELLS.getVolatile(cells, cell(stripe, field)) != 0) {
                return true;
            }
        }
        return false;
    }

    private static int cell(int stripe, int field) {
        return (stripe + 1) * STRIDE + field; // stripe 0 starts one stride in: the padding before it
    }
}
