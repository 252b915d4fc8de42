package dev.compute.memory.spi;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.jspecify.annotations.Nullable;

/**
 * The files the library has mapped, so that every segment over one is known as one wherever it travels.
 *
 * <p><b>Why.</b> A read or write of a mapping past the end of a file truncated under it is a {@code SIGBUS}. Java's own
 * accesses survive it (the JVM turns it into an {@link InternalError}); native code (a driver's copy, a kernel) ends
 * the process. A backend therefore copies a mapping by Java, through a staging buffer, and never hands its address to
 * native code. {@link MemorySegment#isMapped()} says so of the mapping itself, but not of the views and accesses the
 * library hands out over it: those live in arenas of their own, which makes them plain native segments. So the manager
 * registers each mapping here, and {@link #isOverMapping} answers for any segment.
 *
 * <p><b>Faults that arrive late.</b> Once the JIT has compiled a copy, the JVM delivers the fault of a truncated
 * mapping asynchronously, at the thread's next safepoint check, which may come after the code that would catch it.
 * {@link #surfaceFaults()} makes that check happen where the caller stands (a call to native code and back), so that
 * the fault is thrown inside the caller's {@code try}.
 *
 * <p>Thread-safe. For backends and the manager: applications need none of it.
 */
public final class FileMappings {

    /** One mapping: its memory, and the bytes of the file it maps. */
    public record Mapping(long address, long byteSize, Path file, long fileOffset) {

        boolean contains(long start, long bytes) {
            return start >= address && start - address < byteSize && bytes <= byteSize - (start - address);
        }
    }

    private static final ConcurrentSkipListMap<Long, Mapping> MAPPINGS = new ConcurrentSkipListMap<>();
    /** How many mappings are registered: with none, no segment needs a lookup. */
    private static final AtomicInteger COUNT = new AtomicInteger();

    private FileMappings() {}

    /** The manager mapped {@code mapping}, bytes from {@code fileOffset} of {@code file}: what to unregister it by. */
    public static Mapping register(MemorySegment mapping, Path file, long fileOffset) {
        Mapping registered = new Mapping(mapping.address(), mapping.byteSize(), file, fileOffset);
        if (MAPPINGS.put(registered.address(), registered) == null) {
            COUNT.incrementAndGet();
        }
        return registered;
    }

    /**
     * The manager is about to unmap {@code mapping}: it is known no more. Only that entry goes, never another mapping
     * registered since at the same addresses (which only an unmap can give back).
     */
    public static void unregister(Mapping mapping) {
        if (MAPPINGS.remove(mapping.address(), mapping)) {
            COUNT.decrementAndGet();
        }
    }

    /** True when any byte of {@code segment} is in a file mapping: its own, or one the library made. */
    public static boolean isOverMapping(MemorySegment segment) {
        return segment.isMapped() || find(segment) != null;
    }

    /** The library's mapping that {@code segment} lies in, or null (a heap segment, or memory no mapping holds). */
    public static @Nullable Mapping find(MemorySegment segment) {
        if (COUNT.get() == 0 || !segment.isNative()) {
            return null;
        }
        Map.Entry<Long, Mapping> below = MAPPINGS.floorEntry(segment.address());
        if (below == null) {
            return null;
        }
        Mapping mapping = below.getValue();
        return mapping.contains(segment.address(), Math.max(1, segment.byteSize())) ? mapping : null;
    }

    /**
     * Throws, here, a fault that an earlier access of this thread to a mapping met and the JVM has not yet delivered
     * (an {@link InternalError}); does nothing when none is pending. Costs a call to native code and back.
     */
    public static void surfaceFaults() {
        MethodHandle roundTrip = NativeRoundTrip.GETPID;
        if (roundTrip == null) {
            Thread.yield(); // a native call too, dearer
            return;
        }
        try {
            int ignored = (int) roundTrip.invokeExact();
        } catch (RuntimeException | Error e) {
            throw e;
        } catch (Throwable impossible) {
            throw new IllegalStateException(impossible);
        }
    }

    /** {@code getpid()}: the cheapest call there is to native code, whose return is where the JVM delivers a pending fault. */
    private static final class NativeRoundTrip {
        static final @Nullable MethodHandle GETPID = getpid();

        private static @Nullable MethodHandle getpid() {
            Linker linker = Linker.nativeLinker();
            return linker.defaultLookup().find("getpid")
                    .map(address -> linker.downcallHandle(address, FunctionDescriptor.of(ValueLayout.JAVA_INT)))
                    .orElse(null);
        }
    }
}
