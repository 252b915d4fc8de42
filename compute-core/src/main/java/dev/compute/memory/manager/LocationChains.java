package dev.compute.memory.manager;

import dev.compute.memory.MemoryEventListener;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.spi.ComputeBackend;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.EnumSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import org.jspecify.annotations.Nullable;

/**
 * The chain of each location the manager offers ({@link ChainBuilder} makes them), which location is the default and
 * where discrete buffers keep their host mirrors (PINNED where it is host memory, else HOST).
 */
public final class LocationChains {

    private final ComputeBackend backend;
    private final CallGate gate;
    /** The chains by their location's ordinal: what every allocation looks up, in one array load. */
    private final @Nullable LocationChain[] byOrdinal = new LocationChain[MemoryLocation.values().length];
    private List<MemoryLocation> locations = List.of();
    private MemoryLocation mirrorLocation = MemoryLocation.HOST;

    public LocationChains(ComputeBackend backend, CallGate gate) {
        this.backend = backend;
        this.gate = gate;
    }

    void add(MemoryLocation location, LocationChain chain) {
        byOrdinal[location.ordinal()] = chain;
        List<MemoryLocation> all = new ArrayList<>(locations);
        all.add(location);
        locations = List.copyOf(all);
        mirrorLocation = chainOf(MemoryLocation.PINNED) != null && backend.hostAccessible(MemoryLocation.PINNED)
                ? MemoryLocation.PINNED : MemoryLocation.HOST;
    }

    /** The locations, in {@link MemoryLocation}'s order. */
    public List<MemoryLocation> locations() {
        return locations;
    }

    /** The chains, in {@link MemoryLocation}'s order. */
    public Collection<LocationChain> all() {
        return Arrays.stream(byOrdinal).filter(Objects::nonNull).toList();
    }

    Set<MemoryLocation> offered() {
        return locations.isEmpty() ? EnumSet.noneOf(MemoryLocation.class) : EnumSet.copyOf(locations);
    }

    public MemoryLocation mirrorLocation() {
        return mirrorLocation;
    }

    /** The chain to allocate from: refused once the manager is closed, or where this manager has no such location. */
    public LocationChain open(MemoryLocation location) {
        if (gate.isClosed()) {
            throw CallGate.closedManager();
        }
        LocationChain chain = byOrdinal[Objects.requireNonNull(location, "location").ordinal()];
        if (chain == null) {
            throw new IllegalArgumentException(location + " memory is not available on this manager (" + backend.info().backend()
                    + "): " + (location == MemoryLocation.PINNED && backend.supports(location).available()
                    ? "pinning is disabled (compute.memory.pinning.enabled=false)"
                    : backend.supports(location).detail()) + "; available: " + locations);
        }
        return chain;
    }

    /** The chain of a location this manager has, open or closed: for figures. */
    public LocationChain known(MemoryLocation location) {
        LocationChain chain = chainOf(location);
        if (chain == null) {
            throw new IllegalArgumentException(location + " memory is not available on this manager; available: " + locations);
        }
        return chain;
    }

    /** The chain of a location this manager has, or null: for a buffer's own location, which always has one. */
    LocationChain of(MemoryLocation location) {
        return byOrdinal[location.ordinal()];
    }

    public boolean hostAccessible(MemoryLocation location) {
        LocationChain chain = chainOf(location);
        return chain != null && chain.hostAccessible;
    }

    /** The chain of {@code location}, or null where there is none (or no location). */
    private @Nullable LocationChain chainOf(@Nullable MemoryLocation location) {
        return location == null ? null : byOrdinal[location.ordinal()];
    }

    /**
     * Has {@code location}'s pool keep room for a new budget's reservation ({@code keep}; {@code withdraw} undoes it) where
     * it fits beside the memory the pool holds (whole segments and pages, whatever their blocks ask for) and the room it
     * keeps for the other reservations, once its cached memory is given back where it does not: returns 0 then, else by
     * how much they pass its cap, the reservation withdrawn. At a location the manager has not used, kept at once.
     */
    public long keepAsideWhereItFits(MemoryLocation location, Runnable keep, Runnable withdraw, MemoryEventListener events) {
        LocationChain chain = chainOf(location);
        if (chain == null) {
            keep.run();
            return 0;
        }
        int stripe = gate.enterAlways();
        try {
            long shortfall = chain.keepAsideWhereItFits(keep, withdraw);
            if (shortfall > 0 && !gate.isClosed()) {
                chain.trim(0, events);
                shortfall = chain.keepAsideWhereItFits(keep, withdraw);
            }
            return shortfall;
        } finally {
            gate.exitQuietly(stripe);
        }
    }

    /**
     * Trims every location to {@code keepBytes} of cache, stopping if the manager closes meanwhile; what went back. A
     * location whose backend refuses stops no other's trim: the first refusal is thrown once every location was tried.
     */
    public long trimAll(long keepBytes, MemoryEventListener events) {
        int stripe = gate.enterAlways();
        try {
            long released = 0;
            RuntimeException refused = null;
            for (LocationChain chain : all()) {
                if (gate.isClosed()) {
                    break;
                }
                try {
                    released += chain.trim(keepBytes, events);
                } catch (RuntimeException e) {
                    if (refused == null) {
                        refused = e;
                    } else {
                        refused.addSuppressed(e);
                    }
                }
            }
            if (refused != null) {
                throw refused;
            }
            return released;
        } finally {
            gate.exitQuietly(stripe);
        }
    }

    /** Closes every chain, freeing what the pools hold. */
    void closeAll() {
        all().forEach(LocationChain::close);
    }
}
