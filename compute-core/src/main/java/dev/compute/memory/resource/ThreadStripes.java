package dev.compute.memory.resource;

/**
 * Which stripe of a per-thread-striped structure the calling thread uses: its id modulo {@link #COUNT}, as
 * Netty's thread caches and HikariCP's thread-local lists pick theirs. Two threads that work at once then
 * write different cache lines; threads whose ids collide share a stripe, which stays correct, only slower.
 */
public final class ThreadStripes {

    /** A power of two, at least four times the processors (fewer collisions of thread ids), at most 64. */
    public static final int COUNT = Math.min(64, Integer.highestOneBit(Math.max(1, Runtime.getRuntime().availableProcessors()) * 4 - 1));

    private ThreadStripes() {}

    /** The calling thread's stripe, 0 to {@link #COUNT} − 1. */
    public static int ofCurrentThread() {
        return (int) Thread.currentThread().threadId() & (COUNT - 1);
    }
}
