package dev.compute.memory.resource;

import java.util.Map;
import java.util.function.ToLongFunction;
import org.jspecify.annotations.Nullable;

/**
 * The room under a location's cap that budgets' reservations keep out of other requests' reach: each reservation
 * beyond its live memory in what a pool holds apart for it, but the one the calling thread's request is made under.
 * Not beyond all the pool holds for it: what it freed beside a live block (in a plain segment, a page) cannot serve a
 * larger request of its own. Counted in memory, not in the books' bytes, which count a request on its way to the pool
 * as held before it is, and room a budget keeps for its next requests, which is no memory, as held too. Thread-safe.
 */
final class KeptAside {

    private volatile ReservedRoom reservations = ReservedRoom.NONE;
    /** The live memory a pool holds apart for a reservation, by the reservation's key. */
    private volatile ToLongFunction<Object> live = key -> 0;

    void keepFor(ReservedRoom reservations) {
        this.reservations = reservations;
    }

    void liveIn(ToLongFunction<Object> live) {
        this.live = live;
    }

    /** The bytes kept out of the calling thread's reach now. */
    long bytes() {
        ReservedRoom room = reservations;
        Map<Object, Long> reserved = room.reservations();
        if (reserved.isEmpty()) {
            return 0;
        }
        Object mine = room.reservingBudget();
        long kept = 0;
        for (Map.Entry<Object, Long> each : reserved.entrySet()) {
            if (each.getKey() != mine) {
                kept += Math.max(0, each.getValue() - live.applyAsLong(each.getKey()));
            }
        }
        return kept;
    }

    @Nullable Object reservingBudget() {
        return reservations.reservingBudget();
    }

    /** Whether the reservation of key {@code reservation} stands: its budget has not closed. */
    boolean stands(Object reservation) {
        return reservations.reservations().containsKey(reservation);
    }
}
