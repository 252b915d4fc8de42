package dev.compute.memory.resource;

import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * What budgets reserve at one location, as the location's {@link BackendResource} keeps room for it (the manager answers
 * from its budgets' books). Called under the pool's lock: no answer may call back into the pool.
 */
public interface ReservedRoom {

    /** No budget reserves anything. */
    ReservedRoom NONE = new ReservedRoom() {
        @Override
        public Map<Object, Long> reservations() {
            return Map.of();
        }

        @Override
        public @Nullable Object reservingBudget() {
            return null;
        }
    };

    /** Each reserving budget's reservation, by a key of its own (a reserving budget inside another counts in that one's). */
    Map<Object, Long> reservations();

    /** The key of the reservation the calling thread's request is made under; null for a request under none. */
    @Nullable Object reservingBudget();
}
