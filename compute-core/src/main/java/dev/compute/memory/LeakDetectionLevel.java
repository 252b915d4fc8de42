package dev.compute.memory;

/** How buffers that become unreachable without {@code close()} are found, as in Netty. */
public enum LeakDetectionLevel {
    /** No tracking: a leaked buffer's memory is lost until the manager closes. */
    DISABLED,
    /** About one buffer in {@value dev.compute.memory.LeakDetectionLevel#SIMPLE_SAMPLING_INTERVAL} is tracked, without its allocation site. */
    SIMPLE,
    /** Every buffer is tracked with the stack trace of its allocation. Costly; for finding a leak. */
    PARANOID;

    /** One tracked buffer in this many at {@link #SIMPLE}. */
    public static final int SIMPLE_SAMPLING_INTERVAL = 128;
}
