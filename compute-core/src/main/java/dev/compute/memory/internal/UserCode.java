package dev.compute.memory.internal;

/**
 * The stretches where a thread runs the application's code on a manager's behalf (its listeners, its out-of-memory
 * handlers), often inside a call of that manager: a close started there must not wait for the call it is inside of,
 * and a pool refuses what a listener asks of it ({@link #inListener()}).
 * And the one way to add a failure of the application's code to another, which may be the very same object (a
 * handler that rethrows the failure it was handed).
 */
public final class UserCode {

    /** Per thread: [0] the depth of the application's code of any kind, [1] of listeners among it. */
    private static final ThreadLocal<int[]> DEPTH = ThreadLocal.withInitial(() -> new int[2]);

    private UserCode() {}

    /** The calling thread starts running the application's code; pair with {@link #exit()} in a {@code finally}. */
    public static void enter() {
        DEPTH.get()[0]++;
    }

    public static void exit() {
        DEPTH.get()[0]--;
    }

    /** The calling thread starts running a listener; pair with {@link #exitListener()} in a {@code finally}. */
    public static void enterListener() {
        int[] depth = DEPTH.get();
        depth[0]++;
        depth[1]++;
    }

    public static void exitListener() {
        int[] depth = DEPTH.get();
        depth[0]--;
        depth[1]--;
    }

    /** How deep in the application's code the calling thread runs on the library's behalf: 0 outside of it. */
    public static int depth() {
        return DEPTH.get()[0];
    }

    /** True while the calling thread runs a listener or handler of the library's. */
    public static boolean running() {
        return DEPTH.get()[0] > 0;
    }

    /**
     * True while the calling thread runs a listener: some are told under a pool's lock, so what it asks of any pool
     * (an allocation, a trim, a compaction) would take a second pool's lock under the first, and two threads doing so
     * the other way round would wait for each other for ever; an allocation from a listener of failures would be told
     * to it again, inside itself, without end.
     */
    public static boolean inListener() {
        return DEPTH.get()[1] > 0;
    }

    /**
     * Refuses an allocation from within a listener ({@link #inListener()}) at {@code location}: asked where an allocation
     * would take a pool's lock or call the backend, so that one the pool's cache serves at once costs nothing more.
     */
    public static void refuseInListener(Object location) {
        if (inListener()) {
            throw new IllegalStateException(location + " memory: allocation from within a MemoryEventListener, which may be told"
                    + " under a pool's lock (taking another's there could deadlock with a thread doing the reverse) or of the failure"
                    + " of this very allocation; allocate after the call returns instead");
        }
    }

    /** Adds {@code extra} to {@code target}'s suppressed failures, unless they are one (self-suppression throws). */
    public static void suppress(Throwable target, Throwable extra) {
        if (target != extra) {
            target.addSuppressed(extra);
        }
    }
}
