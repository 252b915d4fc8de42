package dev.compute.memory.resource;

/**
 * What budgets reserve at one location, as the location's {@link BackendResource} keeps room for it (the manager answers
 * from its budgets' books). Called under the pool's lock: no answer may call back into the pool.
 */
public interface ReservedRoom {

    /** No budget reserves anything. */
    ReservedRoom NONE = new ReservedRoom() {
        @Override
        public long unusedReservations() {
            return 0;
        }

        @Override
        public long reservations() {
            return 0;
        }

        @Override
        public boolean reservingRequest() {
            return false;
        }
    };

    /** The reservations not in use, as the books count them, but for the calling thread's own budget's. */
    long unusedReservations();

    /** Every budget's reservation, all together. */
    long reservations();

    /** Whether the calling thread's request is one through a budget that reserves memory (or one under it). */
    boolean reservingRequest();
}
