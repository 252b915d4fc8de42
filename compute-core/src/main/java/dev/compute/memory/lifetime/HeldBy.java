package dev.compute.memory.lifetime;

import java.util.List;

/**
 * What holds a closed buffer's memory, for a warning about memory that has waited long: the threads whose views or
 * accesses hold it, by name (none: empty), whether copies or ops under way hold it, and whether some of the views
 * belong to view scopes still open. Buffers held alike are told of together.
 */
public record HeldBy(List<String> holders, boolean ops, boolean inOpenViewScopes) {

    public HeldBy {
        holders = List.copyOf(holders);
    }
}
