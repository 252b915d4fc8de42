package dev.compute.memory.manager;

import java.util.function.BooleanSupplier;

/**
 * Bounded waits that memory may be reused after: the backends' waits give up when interrupted, so each wait is made
 * again until its deadline and the interrupt is taken off meanwhile; the caller puts it back once it is done
 * ({@link #interrupted()}).
 */
final class WaitThroughInterrupts {

    private boolean interrupted;

    /** Whether {@code wait} succeeded before {@code deadline} ({@link System#nanoTime()}), interrupts or not. */
    boolean until(long deadline, BooleanSupplier wait) {
        while (!wait.getAsBoolean()) {
            if (!Thread.interrupted()) {
                return false;
            }
            interrupted = true;
            if (System.nanoTime() - deadline >= 0) {
                return false;
            }
        }
        return true;
    }

    /** Whether an interrupt came during a wait (and was taken off). */
    boolean interrupted() {
        return interrupted;
    }
}
