package dev.compute.memory;

import java.util.Map;

/**
 * The figures of one {@link MemoryBudget}, read together, one state of it. They count what was allocated through the
 * budget and through every budget under it: a child's bytes count in each of its ancestors. Bytes are as buffers asked
 * for them, from the allocation until the memory goes back to the pool (after {@code close()}, once views and device
 * work on it have ended). Mapped files are counted apart ({@link #mappedFiles()}, {@link #mappedBytes()}), as the
 * manager counts them: they are no pooled memory and count against no limit.
 *
 * @param name               the budget's path: its name, after its ancestors' names and a {@code '/'} each
 * @param limitBytes         the most it may hold at all locations together
 * @param allocatedBytes     bytes held now, at all locations
 * @param allocatedBytesPeak the most it held at once
 * @param liveBuffers        buffers whose memory is not back yet (mapped files apart)
 * @param allocations        buffers ever allocated through it (batches count each buffer)
 * @param refusals           requests refused for want of room by a budget on their way (this one, one under it that
 *                           they came through, one above it) or at the cap beside the reservations; not the pool's
 *                           own refusals, nor those of a request above the cap by itself
 * @param reservedBytes      bytes kept for it alone, at all locations
 * @param waitingRequests    {@code allocateAsync} requests queued for its room now
 * @param mappedFiles        files mapped through it whose mapping is not undone yet
 * @param mappedBytes        the bytes of those mappings
 * @param locations          the figures of each location it has a limit or a reservation at, or has ever held memory at
 */
public record BudgetStatistics(String name, long limitBytes, long allocatedBytes, long allocatedBytesPeak, long liveBuffers,
                               long allocations, long refusals, long reservedBytes, long waitingRequests, long mappedFiles,
                               long mappedBytes, Map<MemoryLocation, Location> locations) {

    public BudgetStatistics {
        locations = Map.copyOf(locations);
    }

    /**
     * One location's figures of a budget.
     *
     * @param limitBytes         the most it may hold there (its limit there, or its limit at all)
     * @param reservedBytes      bytes kept there for it alone
     * @param allocatedBytes     bytes held there now
     * @param allocatedBytesPeak the most it held there at once
     */
    public record Location(long limitBytes, long reservedBytes, long allocatedBytes, long allocatedBytesPeak) {}

    /** How much of its limit at {@code location} it holds, 0 to 1; 0 at a location it has no figures for. */
    public double usedShare(MemoryLocation location) {
        Location figures = locations.get(location);
        return figures == null ? 0 : (double) figures.allocatedBytes() / figures.limitBytes();
    }

    /** The highest share of a limit it holds: of its limit at all, or of its limit at a location, whichever is fuller. */
    public double usedShare() {
        double fullest = (double) allocatedBytes / limitBytes;
        for (MemoryLocation location : locations.keySet()) {
            fullest = Math.max(fullest, usedShare(location));
        }
        return fullest;
    }
}
