package dev.compute.memory.manager;

import dev.compute.memory.DataType;
import dev.compute.memory.FileMapMode;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.internal.ManagerLog;
import dev.compute.memory.lifetime.FileRange;
import dev.compute.memory.resource.Block;
import dev.compute.memory.internal.RegularFiles;
import dev.compute.memory.spi.FileMappings;
import dev.compute.memory.spi.NativeAllocation;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.channels.ClosedByInterruptException;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Set;
import org.jspecify.annotations.Nullable;

/**
 * One mapped range of a file, as the {@link Block} of its buffer: a HOST allocation whose host segment is the
 * mapping itself. It belongs to {@link MappedFiles}, never to a pool or a backend, so it is never carved, cached or
 * handed to another buffer; it is unmapped once, when its buffer's last holder lets go or its manager closes.
 *
 * <p>The mapping lives in a shared arena of its own: the last holder may let go on any thread (a view's owner, a
 * thread that completes device work, the leak detector's cleaner), and closing a shared arena is the one way to
 * unmap from there. Closing it costs a handshake with every thread, once per mapping. The file's channel is closed
 * as soon as the range is mapped: the mapping does not need it.
 */
public final class MappedFile implements Block {

    private static final System.Logger LOG = ManagerLog.logger();
    /**
     * What {@link FileChannel#map} says of a read-only channel over a file shorter than the range, which it looks at
     * again: another process truncated the file since {@link #checkedRange} read its size.
     */
    private static final String CHANNEL_WOULD_EXTEND = "cannot extend file to required size";

    private final FileRange range;
    private final Arena arena;
    private final MemorySegment mapping;
    /** How {@link FileMappings} knows it; again after a failed unmap. */
    private FileMappings.Mapping registered;
    private final NativeAllocation allocation;
    private final @Nullable String allocationSite;
    private boolean unmapped;
    /** Its buffer gave it back (closed, nothing holding it): mapped still only while device work on it runs. */
    private volatile boolean released;

    private MappedFile(FileRange range, Arena arena, MemorySegment mapping, FileMappings.Mapping registered, @Nullable String allocationSite) {
        this.range = range;
        this.arena = arena;
        this.mapping = mapping;
        this.registered = registered;
        this.allocation = new NativeAllocation(MemoryLocation.HOST, mapping.address(), range.length(), mapping, null);
        this.allocationSite = allocationSite;
    }

    /**
     * Maps {@code length} bytes of {@code file} from {@code offset}, or from there to the file's end when
     * {@code length} is null. Whole elements of {@code type} only, starting at a multiple of its size (the mapping
     * starts on a page, so its elements are aligned in memory as the element size asks). A mapping never extends the
     * file, in either mode, but where another process truncates it after its size was read: the channel's map then
     * extends it back to the range's end READ_WRITE (its own check, which nothing here can hold off).
     */
    static MappedFile map(Path file, DataType type, FileMapMode mode, long offset, @Nullable Long length, @Nullable String site)
            throws IOException {
        try {
            return mapOpened(file, type, mode, offset, length, site);
        } catch (ClosedByInterruptException e) {
            throw RegularFiles.interrupted("cannot map " + file, "map", e);
        }
    }

    private static MappedFile mapOpened(Path file, DataType type, FileMapMode mode, long offset, @Nullable Long length, @Nullable String site)
            throws IOException {
        try (FileChannel channel = RegularFiles.open(file, openOptions(mode), "mapped")) {
            long fileSize = channel.size();
            FileRange range = new FileRange(file, mode, offset, checkedRange(file, type, fileSize, offset, length));
            Arena arena = Arena.ofShared();
            try {
                MemorySegment mapping = channel.map(mode == FileMapMode.READ_ONLY ? FileChannel.MapMode.READ_ONLY : FileChannel.MapMode.READ_WRITE, offset, range.length(), arena);
                return new MappedFile(range, arena, mapping, FileMappings.register(mapping, file, offset), site);
            } catch (IOException | RuntimeException | Error e) {
                arena.close();
                if (e.getClass() == IOException.class && String.valueOf(e.getMessage()).contains(CHANNEL_WOULD_EXTEND)) {
                    throw new IllegalArgumentException("bytes [" + offset + ", " + (offset + range.length()) + ") are outside " + file
                            + ", which was truncated while it was being mapped (" + channel.size() + " bytes now); a mapping never extends a file", e);
                }
                if (e.getClass() == IOException.class) {
                    // the system's refusal alone ("No such device": sysfs's attributes) names no file
                    throw new IOException("cannot map " + file + ": " + e.getMessage() + " (its file system may not map files)", e);
                }
                throw e;
            }
        }
    }

    /** The file opened for what the mapping needs: read permission, and write permission to map it read-write. */
    private static Set<StandardOpenOption> openOptions(FileMapMode mode) {
        return mode == FileMapMode.READ_ONLY ? Set.of(StandardOpenOption.READ) : Set.of(StandardOpenOption.READ, StandardOpenOption.WRITE);
    }

    /** The length to map, once the request is checked against the file and the element type. */
    private static long checkedRange(Path file, DataType type, long fileSize, long offset, @Nullable Long length) {
        int unit = type.byteSize();
        if (offset < 0 || offset % unit != 0) {
            throw new IllegalArgumentException("a mapping of " + type + " elements must start at a multiple of " + unit
                    + " bytes into the file, 0 or more; " + offset + " is not");
        }
        long bytes = length != null ? length : fileSize - offset;
        if (length == null && bytes <= 0) {
            throw new IllegalArgumentException(file + " has " + fileSize + " bytes, nothing to map"
                    + (offset == 0 ? "" : " from byte " + offset));
        }
        if (bytes <= 0 || bytes % unit != 0) {
            throw new IllegalArgumentException((length == null ? "the " + bytes + " bytes of " + file + (offset == 0 ? "" : " from byte " + offset)
                    + " are" : "a length of " + bytes + " bytes is") + " not a positive whole number of " + type + " elements ("
                    + unit + " bytes each)" + (length == null ? "; map a range of it with mapFile(file, type, mode, offset, length)" : ""));
        }
        if (offset > fileSize - bytes) {
            String end = bytes > Long.MAX_VALUE - offset ? offset + " + " + bytes : String.valueOf(offset + bytes);
            throw new IllegalArgumentException("bytes [" + offset + ", " + end + ") are outside " + file + ", which has "
                    + fileSize + " bytes; a mapping never extends a file: set its length first");
        }
        return bytes;
    }

    public FileRange range() {
        return range;
    }

    /** Its buffer gave it back: from here on no buffer's, whether or not it is unmapped yet. */
    void markReleased() {
        released = true;
    }

    boolean released() {
        return released;
    }

    @Nullable String allocationSite() {
        return allocationSite;
    }

    /**
     * Unmaps, once: true when this call did. Nothing may use the memory any more (the buffer's lifetime rule sees to
     * that); should a native call still hold it, the mapping is kept and said in the log rather than pulled from under it.
     */
    synchronized boolean unmap() {
        if (unmapped) {
            return false;
        }
        // known no more before it is unmapped: after, the system may map another file at these addresses
        FileMappings.unregister(registered);
        try {
            arena.close();
        } catch (IllegalStateException inUse) {
            registered = FileMappings.register(mapping, range.file(), range.offset());
            LOG.log(System.Logger.Level.WARNING, "a native call still holds " + range + "; it stays mapped until the process ends", inUse);
            return false;
        }
        unmapped = true;
        return true;
    }

    @Override
    public NativeAllocation segment() {
        return allocation;
    }

    @Override
    public long offset() {
        return 0;
    }

    @Override
    public long size() {
        return range.length();
    }

    @Override
    public long requestedSize() {
        return range.length();
    }

    @Override
    public String toString() {
        return range.length() + " bytes " + range;
    }
}
