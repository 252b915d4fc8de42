package dev.compute.memory.internal;

/**
 * The one logger every part of the manager writes to, named as the interface users know
 * ({@code dev.compute.memory.UnifiedMemoryManager}), so that one logging setting covers all of it.
 */
public final class ManagerLog {

    /** The logger's name: set its level to see or silence the manager's log. */
    public static final String NAME = "dev.compute.memory.UnifiedMemoryManager";

    private ManagerLog() {}

    public static System.Logger logger() {
        return System.getLogger(NAME);
    }
}
