package dev.compute.sample;

import static java.lang.foreign.ValueLayout.JAVA_DOUBLE_UNALIGNED;

import dev.compute.memory.AccessMode;
import dev.compute.memory.BufferAccess;
import dev.compute.memory.UnifiedBuffer;
import java.lang.foreign.MemorySegment;

/**
 * The clamp on the CPU backend: a Java loop over the device access's segment, which on this backend is the memory
 * itself at every location. The access holds the buffer open until the loop is done.
 */
final class CpuClampKernel implements ClampKernel {

    @Override
    public void clamp(UnifiedBuffer values, double min, double max) {
        try (BufferAccess access = values.deviceAccess(AccessMode.READ_WRITE)) {
            clamp(access.segment(), min, max);
        }
    }

    /** The loop itself, over FLOAT64 values in any segment the calling thread may use. */
    static void clamp(MemorySegment values, double min, double max) {
        long n = values.byteSize() / Double.BYTES;
        for (long i = 0; i < n; i++) {
            values.setAtIndex(JAVA_DOUBLE_UNALIGNED, i, Math.clamp(values.getAtIndex(JAVA_DOUBLE_UNALIGNED, i), min, max));
        }
    }
}
