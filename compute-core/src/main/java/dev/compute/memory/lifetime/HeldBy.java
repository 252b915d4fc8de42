package dev.compute.memory.lifetime;

/**
 * What holds a closed buffer's memory, for a warning about memory that has waited long: the threads whose views or
 * accesses hold it, by name ({@code ""}: none), whether copies or ops under way hold it, and whether some of the views
 * belong to view scopes still open. Buffers held alike are told of together.
 */
public record HeldBy(String holders, boolean ops, boolean inOpenViewScopes) {}
