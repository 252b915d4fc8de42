package dev.compute.memory.internal;

import java.util.concurrent.atomic.AtomicLong;

/**
 * Bytes held against a limit: a take that would pass the limit is refused and counts nothing. How a backend keeps
 * count of memory the system would grant without backing it (a CPU backend's host memory, an OpenCL device's
 * buffers). Thread-safe, without locks.
 */
public final class BytesLedger {

    private final long limitBytes;
    private final AtomicLong heldBytes = new AtomicLong();

    /** A ledger that refuses past {@code limitBytes}. */
    public BytesLedger(long limitBytes) {
        this.limitBytes = limitBytes;
    }

    /** Counts {@code bytes} and returns true, or returns false, counting nothing, where they would pass the limit. */
    public boolean tryTake(long bytes) {
        long held;
        do {
            held = heldBytes.get();
            if (bytes > limitBytes - held) {
                return false;
            }
        } while (!heldBytes.compareAndSet(held, held + bytes));
        return true;
    }

    /** Counts {@code bytes} given back, or taken and then not used. */
    public void giveBack(long bytes) {
        heldBytes.addAndGet(-bytes);
    }

    public long heldBytes() {
        return heldBytes.get();
    }

    public long limitBytes() {
        return limitBytes;
    }
}
