package dev.compute.memory.internal;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.util.Locale;
import org.jspecify.annotations.Nullable;

/**
 * Gives the whole pages of a range of private host memory back to the operating system while the range stays mapped
 * ({@code madvise(MADV_DONTNEED)}, Linux only): a later read of it finds zeros, a later write takes a fresh page, and
 * bytes outside the whole pages (a neighbour's, on a page shared with it) are left as they are. For backends whose host
 * memory is plain anonymous or {@code malloc}ed memory; never for locked, pinned or file-backed pages.
 */
public final class HostPages {

    /** Linux's {@code MADV_DONTNEED}, the same on x86_64 and aarch64. */
    private static final int MADV_DONTNEED = 4;
    private static final @Nullable MethodHandle MADVISE;
    private static final long PAGE_SIZE;

    static {
        MethodHandle madvise = null;
        long pageSize = 0;
        if (System.getProperty("os.name", "").toLowerCase(Locale.ROOT).startsWith("linux")) {
            Linker linker = Linker.nativeLinker();
            MemorySegment advise = linker.defaultLookup().find("madvise").orElse(null);
            MemorySegment getPageSize = linker.defaultLookup().find("getpagesize").orElse(null);
            if (advise != null && getPageSize != null) {
                madvise = linker.downcallHandle(advise, FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_INT));
                try {
                    pageSize = (int) linker.downcallHandle(getPageSize, FunctionDescriptor.of(JAVA_INT)).invokeExact();
                } catch (Throwable e) {
                    madvise = null;
                }
            }
        }
        MADVISE = pageSize > 0 ? madvise : null;
        PAGE_SIZE = pageSize;
    }

    private HostPages() {}

    /**
     * Gives back the whole pages inside {@code bytes} at {@code address}; the bytes given back (0 where no whole page
     * lies inside, off Linux, or where the system refused).
     */
    public static long discard(long address, long bytes) {
        MethodHandle madvise = MADVISE;
        if (madvise == null || bytes <= 0) {
            return 0;
        }
        long first = Math.ceilDiv(address, PAGE_SIZE) * PAGE_SIZE;
        long end = Math.floorDiv(address + bytes, PAGE_SIZE) * PAGE_SIZE;
        if (end <= first) {
            return 0;
        }
        try {
            int result = (int) madvise.invokeExact(MemorySegment.ofAddress(first), end - first, MADV_DONTNEED);
            return result == 0 ? end - first : 0;
        } catch (Throwable e) {
            return 0;
        }
    }
}
