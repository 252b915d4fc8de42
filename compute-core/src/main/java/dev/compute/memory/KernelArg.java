package dev.compute.memory;

import java.util.Objects;

/**
 * A buffer argument of a launch with the access it needs: {@code KernelArg.read(x)} for a buffer the kernel only
 * reads (its device copy is not marked newer, and on OpenCL the kernel gets a read-only {@code cl_mem}),
 * {@code KernelArg.write(y)} for one it only writes, {@code KernelArg.readWrite(y)}, as a buffer passed alone is.
 * Slices are buffers: pass {@code x.slice(offset, count)} and the kernel sees its first element at index 0.
 */
public record KernelArg(UnifiedBuffer buffer, AccessMode mode) {

    public KernelArg {
        Objects.requireNonNull(buffer, "buffer");
        Objects.requireNonNull(mode, "mode");
    }

    /** A buffer the kernel reads: synced to the device first, never marked newer. */
    public static KernelArg read(UnifiedBuffer buffer) {
        return new KernelArg(buffer, AccessMode.READ);
    }

    /** A buffer the kernel writes (and does not read): its device copy is the newer one afterwards. */
    public static KernelArg write(UnifiedBuffer buffer) {
        return new KernelArg(buffer, AccessMode.WRITE);
    }

    /** A buffer the kernel reads and writes: what a buffer passed alone is. */
    public static KernelArg readWrite(UnifiedBuffer buffer) {
        return new KernelArg(buffer, AccessMode.READ_WRITE);
    }
}
