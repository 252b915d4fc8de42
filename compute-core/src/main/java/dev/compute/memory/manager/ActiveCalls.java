package dev.compute.memory.manager;

import dev.compute.memory.internal.StripedLongs;
import dev.compute.memory.internal.ThreadStripes;
import java.util.concurrent.atomic.AtomicLong;

/**
 * How many threads are inside the manager's allocate, release or trim, so that close() can wait for them to
 * leave before it frees everything. Every allocate and free passes here twice, so a call costs one atomic step:
 * a thread enters by claiming its stripe ({@link StripedLongs}), writing its id there if the stripe is free, and
 * leaves by clearing it with a plain release store; a claimed stripe read as free after the manager was marked
 * closed means no call is under way that has not seen the mark. A call that finds its stripe claimed (by
 * another thread, or by an outer call of its own) is counted in a shared count instead.
 *
 * <p>It is also where threads that share a stripe find out: a thread that finds its stripe claimed by another
 * moves to another stripe ({@link ThreadStripes#contended()}), and with it out of every striped structure it
 * shared: two busy threads on one stripe make each other's calls several times slower (the figures:
 * docs/benchmarks-log.md).
 */
final class ActiveCalls {

    private static final int ACTIVE = 0;
    /** What {@link #enter} returns for a call counted in {@link #shared}. */
    private static final int SHARED = -1;

    private final StripedLongs stripes = new StripedLongs();
    /** Calls that found their stripe claimed; rare, so one counter does. */
    private final AtomicLong shared = new AtomicLong();

    /** Counts the calling thread in; returns what to give {@link #exit}. */
    int enter() {
        long self = Thread.currentThread().threadId();
        int stripe = ThreadStripes.of(self);
        long claimedBy = stripes.compareAndExchange(stripe, ACTIVE, 0, self);
        if (claimedBy == 0) {
            return stripe;
        }
        if (claimedBy != self) {
            ThreadStripes.contended(); // this call is counted in the shared count; the thread's next one moves
        }
        shared.incrementAndGet();
        return SHARED;
    }

    void exit(int entered) {
        if (entered == SHARED) {
            shared.decrementAndGet();
        } else {
            stripes.setRelease(entered, ACTIVE, 0);
        }
    }

    boolean any() {
        return shared.get() != 0 || stripes.anyNonZero(ACTIVE);
    }
}
