package dev.compute.memory.cpu;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;

/**
 * The C library calls the CPU backend makes, as FFM downcalls, with the Linux constants they need (the same on
 * x86-64 and AArch64; {@link CpuBackendProvider} refuses other platforms before this class loads).
 *
 * <p>Calls that report failure through {@code errno} capture it in the same downcall (reading it afterwards
 * could see a value the JVM itself set in between) and return it: 0 means success.
 */
final class Posix {

    static final int PROT_NONE = 0;
    static final int PROT_READ = 1;
    static final int PROT_WRITE = 2;
    static final int MAP_PRIVATE = 0x02;
    static final int MAP_FIXED = 0x10;
    static final int MAP_ANONYMOUS = 0x20;
    static final int RLIMIT_MEMLOCK = 8;
    static final int EPERM = 1;
    static final int EAGAIN = 11;
    static final int ENOMEM = 12;
    /** What {@code getrlimit} reports for no limit ({@code RLIM_INFINITY}, all bits set). */
    static final long RLIM_INFINITY = -1L;

    private static final Linker LINKER = Linker.nativeLinker();
    private static final StructLayout CALL_STATE = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO = CALL_STATE.varHandle(MemoryLayout.PathElement.groupElement("errno"));
    private static final Linker.Option CAPTURE_ERRNO = Linker.Option.captureCallState("errno");

    private static final MethodHandle POSIX_MEMALIGN = downcall("posix_memalign", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_LONG));
    private static final MethodHandle FREE = downcall("free", FunctionDescriptor.ofVoid(ADDRESS));
    private static final MethodHandle MMAP = downcall("mmap",
            FunctionDescriptor.of(ADDRESS, ADDRESS, JAVA_LONG, JAVA_INT, JAVA_INT, JAVA_INT, JAVA_LONG), CAPTURE_ERRNO);
    private static final MethodHandle MUNMAP = downcall("munmap", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG), CAPTURE_ERRNO);
    private static final MethodHandle MPROTECT = downcall("mprotect", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_INT), CAPTURE_ERRNO);
    private static final MethodHandle MLOCK = downcall("mlock", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG), CAPTURE_ERRNO);
    private static final MethodHandle GETRLIMIT = downcall("getrlimit", FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS), CAPTURE_ERRNO);
    private static final MethodHandle GETPAGESIZE = downcall("getpagesize", FunctionDescriptor.of(JAVA_INT));
    private static final MethodHandle STRERROR = downcall("strerror", FunctionDescriptor.of(ADDRESS, JAVA_INT));

    private Posix() {}

    private static MethodHandle downcall(String name, FunctionDescriptor descriptor, Linker.Option... options) {
        MemorySegment symbol = LINKER.defaultLookup().find(name)
                .orElseThrow(() -> new UnsatisfiedLinkError("the C library has no '" + name + "'"));
        return LINKER.downcallHandle(symbol, descriptor, options);
    }

    /** {@code posix_memalign}: the address, or 0 when there is no memory (its only failure for a valid alignment). */
    static long alignedMalloc(long alignment, long size) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(ADDRESS);
            int error = (int) POSIX_MEMALIGN.invokeExact(out, alignment, size);
            if (error == ENOMEM) {
                return 0;
            }
            if (error != 0) {
                throw new IllegalStateException("posix_memalign(" + alignment + ", " + size + ") failed: " + describe(error));
            }
            return out.get(ADDRESS, 0).address();
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static void free(long address) {
        try {
            FREE.invokeExact(MemorySegment.ofAddress(address));
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * {@code mmap(NULL, length, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)}: the address, or minus the
     * errno on failure (user-space addresses are positive on the platforms this backend runs on).
     */
    static long mapAnonymous(long length, int prot) {
        return mmap(MemorySegment.NULL, length, prot, MAP_PRIVATE | MAP_ANONYMOUS);
    }

    /**
     * {@code mmap(address, length, prot, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)}: fresh zero pages in
     * place of whatever was mapped there (its memory is given back). 0, or the errno.
     */
    static int replaceWithAnonymous(long address, long length, int prot) {
        long result = mmap(MemorySegment.ofAddress(address), length, prot, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS);
        return result < 0 ? (int) -result : 0;
    }

    private static long mmap(MemorySegment address, long length, int prot, int flags) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(CALL_STATE);
            MemorySegment mapped = (MemorySegment) MMAP.invokeExact(state, address, length, prot, flags, -1, 0L);
            return mapped.address() == -1L ? -errno(state) : mapped.address();
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int munmap(long address, long length) {
        return rangeCall(MUNMAP, address, length);
    }

    static int mlock(long address, long length) {
        return rangeCall(MLOCK, address, length);
    }

    static int mprotect(long address, long length, int prot) {
        return rangeCallWith(MPROTECT, address, length, prot);
    }

    /** {@code int f(void *address, size_t length)}: 0, or the errno. */
    private static int rangeCall(MethodHandle call, long address, long length) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(CALL_STATE);
            int result = (int) call.invokeExact(state, MemorySegment.ofAddress(address), length);
            return result == 0 ? 0 : errno(state);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** {@code int f(void *address, size_t length, int flags)}: 0, or the errno. */
    private static int rangeCallWith(MethodHandle call, long address, long length, int flags) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(CALL_STATE);
            int result = (int) call.invokeExact(state, MemorySegment.ofAddress(address), length, flags);
            return result == 0 ? 0 : errno(state);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** The soft limit on locked memory in bytes, {@link #RLIM_INFINITY} for none. */
    static long memlockLimit() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(CALL_STATE);
            MemorySegment limits = arena.allocate(JAVA_LONG, 2);
            int result = (int) GETRLIMIT.invokeExact(state, RLIMIT_MEMLOCK, limits);
            if (result != 0) {
                throw new IllegalStateException("getrlimit(RLIMIT_MEMLOCK) failed: " + describe(errno(state)));
            }
            return limits.getAtIndex(JAVA_LONG, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static long pageSize() {
        try {
            return (int) GETPAGESIZE.invokeExact();
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** {@code ENOMEM (Cannot allocate memory)}. */
    static String describe(int errno) {
        String name = switch (errno) {
            case EPERM -> "EPERM";
            case EAGAIN -> "EAGAIN";
            case ENOMEM -> "ENOMEM";
            default -> "errno " + errno;
        };
        try {
            MemorySegment message = (MemorySegment) STRERROR.invokeExact(errno);
            return name + " (" + message.reinterpret(Integer.MAX_VALUE).getString(0) + ")";
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    private static int errno(MemorySegment state) {
        return (int) ERRNO.get(state, 0L);
    }

    private static RuntimeException rethrow(Throwable t) {
        if (t instanceof RuntimeException r) {
            throw r;
        }
        if (t instanceof Error e) {
            throw e;
        }
        throw new IllegalStateException("native call failed", t);
    }
}
