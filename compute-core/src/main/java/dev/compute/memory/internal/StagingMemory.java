package dev.compute.memory.internal;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/**
 * Native memory a copy owns while a device reads or writes it (a queued copy's staging), from the C library's
 * {@code malloc} and {@code free}. Not an arena: a shared arena's close stops every thread of the JVM for a moment (a
 * handshake), once per copy, and a confined one cannot be closed by the thread that sees the copy end. The copy frees
 * it exactly once, once nothing can reach it any more; its segment must not be used after that.
 */
public final class StagingMemory {

    private static final Linker LINKER = Linker.nativeLinker();
    private static final MethodHandle MALLOC = LINKER.downcallHandle(LINKER.defaultLookup().findOrThrow("malloc"),
            FunctionDescriptor.of(ValueLayout.ADDRESS, ValueLayout.JAVA_LONG));
    private static final MethodHandle FREE = LINKER.downcallHandle(LINKER.defaultLookup().findOrThrow("free"),
            FunctionDescriptor.ofVoid(ValueLayout.ADDRESS));

    private StagingMemory() {}

    /** {@code bytes} of native memory (at least one byte is taken, so that even an empty copy has its own address). */
    public static MemorySegment allocate(long bytes) {
        MemorySegment memory;
        try {
            memory = (MemorySegment) MALLOC.invokeExact(Math.max(1, bytes));
        } catch (Throwable e) {
            throw new IllegalStateException("malloc failed", e);
        }
        if (memory.equals(MemorySegment.NULL)) {
            throw new OutOfMemoryError("no native memory for a copy's staging of " + bytes + " bytes");
        }
        return memory.reinterpret(bytes);
    }

    /** Gives back what {@link #allocate} gave; once only. */
    public static void free(MemorySegment memory) {
        try {
            FREE.invokeExact(memory);
        } catch (Throwable e) {
            throw new IllegalStateException("free failed", e);
        }
    }
}
