package dev.compute.memory;

import dev.compute.memory.resource.StripedLongs;

/**
 * How many threads are inside the manager's allocate, release or trim, so that close() can wait for them to
 * leave before it frees everything. Counted per thread stripe ({@link StripedLongs}): every allocate and free
 * passes here twice. A thread leaves through the stripe it entered by, so no stripe goes below zero, and no
 * stripe read as zero after the manager was marked closed means no call is under way that has not seen the mark.
 */
final class ActiveCalls {

    private static final int ACTIVE = 0;

    private final StripedLongs stripes = new StripedLongs();

    void enter() {
        stripes.add(ACTIVE, 1);
    }

    void exit() {
        stripes.add(ACTIVE, -1);
    }

    boolean any() {
        return stripes.anyNonZero(ACTIVE);
    }
}
