package dev.compute.memory;

/**
 * Part of a location's warm-up ({@code compute.memory.pooling.warmup}): {@code count} blocks of {@code sizeBytes}
 * bytes, reserved when the manager starts and kept cached, so that the first requests of that size make no backend
 * call. One block of the whole amount ({@code count} 1) reserves one region that later requests of the same arena
 * are carved from: requests up to 1 MiB come from the pool's small arena and larger ones from its large arena, so
 * warm each with sizes of its own.
 */
public record WarmupBlocks(long sizeBytes, int count) {

    /** The bytes these blocks take, before the pool's rounding; fails on overflow. */
    public long totalBytes() {
        return Math.multiplyExact(sizeBytes, (long) count);
    }

    /** As in application.yml's shape: {@code 16 x 4194304 bytes}. */
    @Override
    public String toString() {
        return count + " x " + sizeBytes + " bytes";
    }
}
