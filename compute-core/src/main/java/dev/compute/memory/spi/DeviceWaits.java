package dev.compute.memory.spi;

import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;

/**
 * A bounded wait on the calling thread for device work whose driver offers only an unbounded wait
 * ({@code clWaitForEvents}, {@code cuEventSynchronize}) beside a non-blocking query: the query polled until the work
 * has ended or a deadline has passed, so that every wait on a device is bounded.
 */
public final class DeviceWaits {

    /** How long a wait spins before it parks: a device often ends a short command within it. */
    private static final long SPIN_NANOS = 20_000;
    /** The longest park between two queries. */
    private static final long MAX_PAUSE_NANOS = 100_000;

    private DeviceWaits() {}

    /**
     * Polls {@code ended} until it is true (true) or {@code deadline} ({@link System#nanoTime}) has passed (false); a
     * query that throws ends the wait with its exception. Spins briefly, then parks for growing steps. An interrupt does
     * not cut the wait short (the device may still be using the caller's memory); it is kept for the caller.
     */
    public static boolean until(BooleanSupplier ended, long deadline) {
        long start = System.nanoTime();
        long pause = 5_000;
        boolean interrupted = false;
        try {
            while (true) {
                if (ended.getAsBoolean()) {
                    return true;
                }
                long now = System.nanoTime();
                if (now - deadline >= 0) {
                    return false;
                }
                if (now - start < SPIN_NANOS) {
                    Thread.onSpinWait();
                    continue;
                }
                LockSupport.parkNanos(Math.min(pause, deadline - now));
                pause = Math.min(pause * 2, MAX_PAUSE_NANOS);
                interrupted |= Thread.interrupted();
            }
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
