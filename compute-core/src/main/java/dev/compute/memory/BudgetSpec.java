package dev.compute.memory;

import java.util.EnumMap;
import java.util.Map;
import java.util.Objects;

/**
 * What a {@link MemoryBudget} is allowed: a limit on all it holds, limits per location where a tenant's DEVICE and
 * HOST memory are different things, and a reserved minimum per location, as Arrow's {@code initReservation}: bytes
 * kept for this budget alone, which no other budget may take (see {@link MemoryBudget} for what that guarantees).
 * Sizes are bytes as buffers ask for them. A value, checked as it is made:
 *
 * <pre>{@code
 * BudgetSpec search = BudgetSpec.of("search", 2L << 30)
 *         .withLocationLimit(MemoryLocation.HOST, 256L << 20)
 *         .withReservation(MemoryLocation.DEVICE, 512L << 20);
 * }</pre>
 *
 * @param name           the budget's name among its siblings: not blank, no {@code '/'} (a child's path joins names with it)
 * @param limitBytes     the most it may hold at all locations together, positive
 * @param locationLimits the most it may hold at one location, each positive and at most {@code limitBytes}; a location not
 *                       named has only {@code limitBytes}
 * @param reservations   bytes kept for it at a location, each positive and within the limits, all of them within {@code limitBytes}
 */
public record BudgetSpec(String name, long limitBytes, Map<MemoryLocation, Long> locationLimits, Map<MemoryLocation, Long> reservations) {

    public BudgetSpec {
        if (name == null || name.isBlank()) {
            throw new IllegalArgumentException("a memory budget needs a name");
        }
        if (name.indexOf('/') >= 0) {
            throw new IllegalArgumentException("the name of memory budget '" + name + "' must not contain '/', which joins a child's path");
        }
        if (limitBytes <= 0) {
            throw new IllegalArgumentException("the limit of memory budget '" + name + "' must be positive: " + limitBytes + " bytes");
        }
        locationLimits = copy(locationLimits, "locationLimits");
        reservations = copy(reservations, "reservations");
        locationLimits.forEach((location, bytes) -> {
            if (bytes <= 0) {
                throw new IllegalArgumentException("the " + location + " limit of memory budget '" + name + "' must be positive: " + bytes + " bytes");
            }
            if (bytes > limitBytes) { // it would act as the smaller limit, silently: a mistake in one of the two
                throw new IllegalArgumentException("the " + location + " limit of memory budget '" + name + "' (" + bytes
                        + " bytes) is above its limit at all locations (" + limitBytes + " bytes), which would hold it to "
                        + limitBytes + " bytes at " + location + " too: give a " + location + " limit of at most " + limitBytes
                        + " bytes, or raise the limit");
            }
        });
        long reservedInAll = 0;
        for (Map.Entry<MemoryLocation, Long> reservation : reservations.entrySet()) {
            MemoryLocation location = reservation.getKey();
            long bytes = reservation.getValue();
            long limit = Math.min(limitBytes, locationLimits.getOrDefault(location, Long.MAX_VALUE));
            if (bytes <= 0 || bytes > limit) {
                throw new IllegalArgumentException("memory budget '" + name + "' cannot reserve " + bytes + " bytes of " + location
                        + ": a reservation is positive and within the budget's " + location + " limit of " + limit + " bytes");
            }
            if (bytes > Long.MAX_VALUE - reservedInAll) { // a sum past a long's range, which would wrap below the limit
                throw new IllegalArgumentException("memory budget '" + name + "' reserves more than " + Long.MAX_VALUE
                        + " bytes in all, more than its limit of " + limitBytes + " bytes");
            }
            reservedInAll += bytes;
        }
        if (reservedInAll > limitBytes) {
            throw new IllegalArgumentException("memory budget '" + name + "' reserves " + reservedInAll + " bytes in all, more than its limit of "
                    + limitBytes + " bytes");
        }
    }

    /** A budget of {@code limitBytes} at all locations together, with no limit per location and nothing reserved. */
    public static BudgetSpec of(String name, long limitBytes) {
        return new BudgetSpec(name, limitBytes, Map.of(), Map.of());
    }

    /** This spec, with at most {@code bytes} at {@code location}. */
    public BudgetSpec withLocationLimit(MemoryLocation location, long bytes) {
        return new BudgetSpec(name, limitBytes, with(locationLimits, location, bytes), reservations);
    }

    /** This spec, with {@code bytes} at {@code location} kept for this budget alone. */
    public BudgetSpec withReservation(MemoryLocation location, long bytes) {
        return new BudgetSpec(name, limitBytes, locationLimits, with(reservations, location, bytes));
    }

    /** The most this budget may hold at {@code location}: its limit there, or its limit at all where it has none there. */
    public long limitBytes(MemoryLocation location) {
        return Math.min(limitBytes, locationLimits.getOrDefault(location, Long.MAX_VALUE));
    }

    /** The bytes kept for this budget at {@code location}; 0 where it reserves none. */
    public long reservedBytes(MemoryLocation location) {
        return reservations.getOrDefault(location, 0L);
    }

    private static Map<MemoryLocation, Long> copy(Map<MemoryLocation, Long> sizes, String what) {
        Objects.requireNonNull(sizes, what);
        Map<MemoryLocation, Long> copy = new EnumMap<>(MemoryLocation.class);
        sizes.forEach((location, bytes) -> copy.put(Objects.requireNonNull(location, what + " location"), Objects.requireNonNull(bytes, what + " size")));
        return Map.copyOf(copy);
    }

    private static Map<MemoryLocation, Long> with(Map<MemoryLocation, Long> sizes, MemoryLocation location, long bytes) {
        Map<MemoryLocation, Long> more = new EnumMap<>(MemoryLocation.class);
        more.putAll(sizes);
        more.put(Objects.requireNonNull(location, "location"), bytes);
        return more;
    }
}
