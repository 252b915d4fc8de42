package dev.compute.memory;

/**
 * A budget could not be made: its reservation at {@link #location()} does not fit beside what the budgets above it, or
 * the other budgets under the location's cap, hold and reserve. Nothing of the budget was counted. The message says
 * which limit stands in the way and whose reservations fill it.
 */
public class BudgetReservationException extends IllegalStateException {

    private final MemoryLocation location;
    private final long reservedBytes;

    public BudgetReservationException(MemoryLocation location, long reservedBytes, String message) {
        super(message);
        this.location = location;
        this.reservedBytes = reservedBytes;
    }

    /** Where the reservation did not fit. */
    public MemoryLocation location() {
        return location;
    }

    /** The bytes it asked to reserve there. */
    public long reservedBytes() {
        return reservedBytes;
    }
}
