package dev.compute.memory.internal;

/**
 * The stretches where a thread runs the application's code on a manager's behalf (its listeners, its out-of-memory
 * handlers), often inside a call of that manager: a close started there must not wait for the call it is inside of.
 * And the one way to add a failure of the application's code to another, which may be the very same object (a
 * handler that rethrows the failure it was handed).
 */
public final class UserCode {

    private static final ThreadLocal<int[]> DEPTH = ThreadLocal.withInitial(() -> new int[1]);

    private UserCode() {}

    /** The calling thread starts running the application's code; pair with {@link #exit()} in a {@code finally}. */
    public static void enter() {
        DEPTH.get()[0]++;
    }

    public static void exit() {
        DEPTH.get()[0]--;
    }

    /** True while the calling thread runs a listener or handler of the library's. */
    public static boolean running() {
        return DEPTH.get()[0] > 0;
    }

    /** Adds {@code extra} to {@code target}'s suppressed failures, unless they are one (self-suppression throws). */
    public static void suppress(Throwable target, Throwable extra) {
        if (target != extra) {
            target.addSuppressed(extra);
        }
    }
}
