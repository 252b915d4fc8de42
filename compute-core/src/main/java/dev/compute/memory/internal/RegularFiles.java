package dev.compute.memory.internal;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.nio.channels.ClosedByInterruptException;
import java.nio.channels.FileChannel;
import java.nio.file.AccessDeniedException;
import java.nio.file.FileSystemException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.OpenOption;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.HashSet;
import java.util.Set;
import org.jspecify.annotations.Nullable;

/**
 * Opens only regular files, and never blocks on anything else: opening a named pipe waits until its other end opens
 * (for ever, if nobody does), and a device or a directory is nothing the library can map or write a trace to.
 *
 * <p>A check of the path before opening it leaves a window in which the file can be replaced, by a rename, with a
 * pipe. On Linux the file is therefore opened without blocking ({@code O_NONBLOCK}, through the FFM API), what was
 * opened is checked ({@code /proc/self/fd/N}, which names the open file, whatever happens to the path), and only that
 * file is then opened for the channel. Elsewhere the path is checked, then opened.
 */
public final class RegularFiles {

    // Linux's flags, the same on x86_64 and aarch64
    private static final int O_RDONLY = 0;
    private static final int O_WRONLY = 1;
    private static final int O_RDWR = 2;
    private static final int O_CREAT = 0100;
    private static final int O_NONBLOCK = 04000;
    private static final int O_CLOEXEC = 02000000;
    private static final Path OPEN_FILES = Path.of("/proc/self/fd");

    private RegularFiles() {}

    /** {@code file} exists and is a regular file (after links); otherwise an {@link IllegalArgumentException} or the I/O error. */
    public static void require(Path file, String use) throws IOException {
        BasicFileAttributes attributes = Files.readAttributes(file, BasicFileAttributes.class);
        if (!attributes.isRegularFile()) {
            throw notRegular(file, attributes, use);
        }
    }

    /**
     * {@code file} opened with {@code options} ({@link StandardOpenOption#READ}, {@link StandardOpenOption#WRITE},
     * {@link StandardOpenOption#CREATE}, {@link StandardOpenOption#TRUNCATE_EXISTING}), if it is a regular file, or
     * one {@code CREATE} makes: refused with an {@link IllegalArgumentException} naming what it is otherwise.
     */
    public static FileChannel open(Path file, Set<StandardOpenOption> options, String use) throws IOException {
        boolean create = options.contains(StandardOpenOption.CREATE);
        try {
            require(file, use);
        } catch (NoSuchFileException absent) {
            if (!create) {
                throw absent;
            }
        }
        MethodHandle open = Posix.OPEN;
        if (open == null || !Files.isDirectory(OPEN_FILES)) {
            return FileChannel.open(file, options);
        }
        boolean reads = options.contains(StandardOpenOption.READ);
        boolean writes = options.contains(StandardOpenOption.WRITE);
        int flags = (reads && writes ? O_RDWR : writes ? O_WRONLY : O_RDONLY) | O_NONBLOCK | O_CLOEXEC | (create ? O_CREAT : 0);
        int fd;
        int errno;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment state = arena.allocate(Posix.CALL_STATE);
            fd = (int) open.invokeExact(state, arena.allocateFrom(file.toString()), flags, 0666);
            errno = (int) Posix.ERRNO.get(state, 0L);
        } catch (Throwable e) {
            throw new IOException("cannot open " + file, e);
        }
        if (fd < 0) {
            // changed since the check (into a pipe, say): what the path is now says why; else the system's own reason
            require(file, use);
            throw Posix.failure(file, errno);
        }
        try {
            Path opened = OPEN_FILES.resolve(Integer.toString(fd));
            BasicFileAttributes attributes = Files.readAttributes(opened, BasicFileAttributes.class);
            if (!attributes.isRegularFile()) {
                throw notRegular(file, attributes, use);
            }
            Set<OpenOption> reopen = new HashSet<>(options);
            reopen.remove(StandardOpenOption.CREATE);
            return FileChannel.open(opened, reopen);
        } finally {
            Posix.close(fd);
        }
    }

    private static IllegalArgumentException notRegular(Path file, BasicFileAttributes attributes, String use) {
        String kind = attributes.isDirectory() ? "a directory" : "a named pipe, socket or device";
        return new IllegalArgumentException(file + " is " + kind + ", not a regular file; only regular files can be " + use);
    }

    /** The C library's {@code open} and {@code close}; null where the platform's library has none. */
    private static final class Posix {
        static final StructLayout CALL_STATE = Linker.Option.captureStateLayout();
        static final VarHandle ERRNO = CALL_STATE.varHandle(MemoryLayout.PathElement.groupElement("errno"));
        static final @Nullable MethodHandle OPEN = find("open", FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS,
                ValueLayout.JAVA_INT, ValueLayout.JAVA_INT), Linker.Option.firstVariadicArg(2), Linker.Option.captureCallState("errno"));
        static final @Nullable MethodHandle CLOSE = find("close", FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT));
        static final @Nullable MethodHandle STRERROR = find("strerror", FunctionDescriptor.of(ValueLayout.ADDRESS, ValueLayout.JAVA_INT));

        /** Why {@code open} refused {@code file}, as the JDK would say it: the errno's own exception and message. */
        static IOException failure(Path file, int errno) {
            return switch (errno) {
                case 2 -> new NoSuchFileException(file.toString()); // ENOENT
                case 1, 13 -> new AccessDeniedException(file.toString()); // EPERM, EACCES
                default -> new FileSystemException(file.toString(), null, describe(errno));
            };
        }

        private static String describe(int errno) {
            MethodHandle strerror = STRERROR;
            if (strerror != null) {
                try {
                    MemorySegment text = (MemorySegment) strerror.invokeExact(errno);
                    if (!text.equals(MemorySegment.NULL)) {
                        return text.reinterpret(256).getString(0) + " (errno " + errno + ")";
                    }
                } catch (Throwable ignored) {
                    // the number says it still
                }
            }
            return "errno " + errno;
        }

        private static @Nullable MethodHandle find(String name, FunctionDescriptor descriptor, Linker.Option... options) {
            if (!System.getProperty("os.name", "").startsWith("Linux")) {
                return null;
            }
            Linker linker = Linker.nativeLinker();
            return linker.defaultLookup().find(name).map(symbol -> linker.downcallHandle(symbol, descriptor, options)).orElse(null);
        }

        static void close(int fd) {
            MethodHandle close = CLOSE;
            if (close == null) {
                return;
            }
            try {
                int ignored = (int) close.invokeExact(fd);
            } catch (Throwable e) {
                throw new IllegalStateException("close(" + fd + ") failed", e);
            }
        }
    }

    /**
     * The channel's refusal on a thread whose interrupt flag is set (a cancelled task's), which has no message: of the
     * same type, so that catches of it still hold, saying what failed ({@code "cannot map <file>"}) and why; {@code use}
     * is what the caller may do once the flag is cleared ({@code "map"}). The interrupt stays set.
     */
    public static ClosedByInterruptException interrupted(String failed, String use, ClosedByInterruptException cause) {
        return new Interrupted(failed + ": the thread was interrupted, which closes a file channel as it is used (its interrupt"
                + " flag is still set; clear it with Thread.interrupted() to " + use + " on this thread)", cause);
    }

    private static final class Interrupted extends ClosedByInterruptException {

        private final String message;

        Interrupted(String message, ClosedByInterruptException cause) {
            this.message = message;
            initCause(cause);
        }

        @Override
        public String getMessage() {
            return message;
        }
    }
}
