package dev.compute.boot;

import dev.compute.memory.BudgetSpec;
import dev.compute.memory.InvalidSettingException;
import dev.compute.memory.MemoryLocation;
import java.util.EnumMap;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Pattern;
import org.jspecify.annotations.Nullable;
import org.springframework.boot.context.properties.bind.DefaultValue;
import org.springframework.util.unit.DataSize;

/**
 * One named budget of a manager, {@code compute.budgets.<name>.*} (or, with several managers,
 * {@code compute.managers.<manager>.budgets.<name>.*}): made as the manager is, closed with it. A budget of a named
 * manager is its own: it is not inherited from {@code compute.budgets}. Checked as the manager is made: a bad value,
 * or a reservation that does not fit beside the others under the location's cap, stops start-up naming the property.
 *
 * @param limit The most the budget may hold at all locations together (required), such as 1GB.
 * @param locationLimits The most it may hold at a location (device, host, pinned, unified), where its DEVICE and HOST
 *     memory are different things: each at most the limit; a location not named has only the limit.
 * @param reservations Bytes kept for this budget alone at a location (device, host, pinned, unified), as Arrow's
 *     initReservation: no other budget may take them. Together with the other budgets' within the location's cap
 *     (max-pool-size, max-pinned-size for pinned).
 * @param requestLimit The limit of each budget a web request or a task gets under this one, where
 *     compute.scopes.request-budgets or compute.scopes.task-budgets is on; unset, the budget's own limit.
 */
public record BudgetProperties(
        @Nullable DataSize limit,
        @DefaultValue Map<String, DataSize> locationLimits,
        @DefaultValue Map<String, DataSize> reservations,
        @Nullable DataSize requestLimit) {

    // the name goes into meter tags, log lines and the endpoint's JSON: keep it plain, as a manager's
    private static final Pattern NAME = Pattern.compile("[a-z0-9][a-z0-9-]*");

    public BudgetProperties {
        locationLimits = new LinkedHashMap<>(locationLimits);
        reservations = new LinkedHashMap<>(reservations);
    }

    /**
     * The budget {@code name} as these properties, set under {@code prefix} ({@code compute.budgets}), describe it.
     *
     * @throws InvalidSettingException naming the property of a value that is not allowed
     */
    public BudgetSpec toSpec(String name, String prefix) {
        String at = prefix + "." + name;
        if (!NAME.matcher(name).matches()) {
            throw new InvalidSettingException(at, name, "a budget name of lower-case letters, digits and dashes, such as tenant-a");
        }
        if (limit == null) {
            throw new InvalidSettingException(at + ".limit", "", "a positive size, such as 512MB or 1GB: the most the budget may hold (required)");
        }
        long limitBytes = positive(at + ".limit", limit);
        BudgetSpec spec = BudgetSpec.of(name, limitBytes);
        Map<MemoryLocation, String> limited = new EnumMap<>(MemoryLocation.class);
        for (Map.Entry<String, DataSize> entry : locationLimits.entrySet()) {
            String property = at + ".location-limits." + entry.getKey();
            MemoryLocation location = once(limited, location(property, entry.getKey()), property);
            long bytes = positive(property, entry.getValue());
            if (bytes > limitBytes) {
                throw new InvalidSettingException(property, bytes + " bytes", "at most " + at + ".limit (" + limitBytes
                        + " bytes): the budget holds at most that at all locations together, " + location + " included");
            }
            spec = spec.withLocationLimit(location, bytes);
        }
        Map<MemoryLocation, Long> reserving = new LinkedHashMap<>();
        long reservedInAll = 0;
        Map<MemoryLocation, String> reserved = new EnumMap<>(MemoryLocation.class);
        for (Map.Entry<String, DataSize> entry : reservations.entrySet()) {
            String property = at + ".reservations." + entry.getKey();
            MemoryLocation location = once(reserved, location(property, entry.getKey()), property);
            long bytes = positive(property, entry.getValue());
            if (bytes > spec.limitBytes(location)) {
                throw new InvalidSettingException(property, bytes + " bytes", "a size within the budget's limit at " + location + " ("
                        + spec.limitBytes(location) + " bytes: " + at + (spec.limitBytes(location) < limitBytes ? ".location-limits."
                        + entry.getKey() : ".limit") + ")");
            }
            if (bytes > Long.MAX_VALUE - reservedInAll) { // the sum would wrap below the limit
                throw reservingMoreThanTheLimit(at, "more than " + Long.MAX_VALUE, limitBytes);
            }
            reservedInAll += bytes;
            reserving.put(location, bytes);
        }
        if (reservedInAll > limitBytes) {
            throw reservingMoreThanTheLimit(at, Long.toString(reservedInAll), limitBytes);
        }
        for (Map.Entry<MemoryLocation, Long> reservation : reserving.entrySet()) {
            spec = spec.withReservation(reservation.getKey(), reservation.getValue());
        }
        if (requestLimit != null && positive(at + ".request-limit", requestLimit) > limitBytes) {
            throw new InvalidSettingException(at + ".request-limit", requestLimit.toBytes() + " bytes", "at most " + at + ".limit ("
                    + limitBytes + " bytes): a request's budget counts in its tenant's");
        }
        return spec;
    }

    private static InvalidSettingException reservingMoreThanTheLimit(String at, String reservedInAll, long limitBytes) {
        return new InvalidSettingException(at + ".reservations", reservedInAll + " bytes in all", "at most " + at + ".limit (" + limitBytes
                + " bytes): a budget cannot keep more than it may hold");
    }

    /** The limit of a request's or a task's own budget under this one. */
    public long requestLimitBytes() {
        return requestLimit != null ? requestLimit.toBytes() : limit != null ? limit.toBytes() : 0;
    }

    // Keys are read here rather than bound as enums, so that a wrong one gets the same report as every other bad value.
    private static MemoryLocation location(String property, String key) {
        // in ASCII's case only: equalsIgnoreCase folds hoſt (a long s) to host and pınned (a dotless i) to pinned
        String lowerCase = key.strip().toLowerCase(Locale.ROOT);
        for (MemoryLocation location : MemoryLocation.values()) {
            if (location.name().toLowerCase(Locale.ROOT).equals(lowerCase)) {
                return location;
            }
        }
        throw new InvalidSettingException(property, key, "a location: device, host, pinned or unified");
    }

    /**
     * {@code location}, named by {@code property}, unless another key of that map named it already (host and HOST):
     * one of the two values would be lost without a word.
     */
    private static MemoryLocation once(Map<MemoryLocation, String> named, MemoryLocation location, String property) {
        String before = named.putIfAbsent(location, property);
        if (before != null) {
            throw new InvalidSettingException(property, location, "one value for " + location + ": " + before + " sets it already");
        }
        return location;
    }

    private static long positive(String property, @Nullable DataSize size) {
        if (size == null || size.toBytes() <= 0) {
            throw new InvalidSettingException(property, size == null ? "" : size.toBytes() + " bytes", "a positive size, such as 512MB or 1GB");
        }
        return size.toBytes();
    }
}
