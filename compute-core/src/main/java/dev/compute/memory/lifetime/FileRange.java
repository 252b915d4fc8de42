package dev.compute.memory.lifetime;

import dev.compute.memory.FileMapMode;
import dev.compute.memory.MappedFileTruncatedException;
import dev.compute.memory.spi.FileMappings;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import org.jspecify.annotations.Nullable;

/** Which bytes of which file a mapped buffer is, and how they were mapped. */
public record FileRange(Path file, FileMapMode mode, long offset, long length) {

    public boolean readOnly() {
        return mode == FileMapMode.READ_ONLY;
    }

    /**
     * Throws {@link MappedFileTruncatedException} when {@code failure} comes from a fault of a memory access (the
     * JVM turns the {@code SIGBUS} of a read or write past a file's end into an {@link InternalError}) and the file
     * is now shorter than this range; returns otherwise, leaving the caller to rethrow {@code failure}.
     */
    public void failIfTruncated(Throwable failure) {
        failIfTruncated(failure, file, offset, length);
    }

    /** As {@link #failIfTruncated(Throwable)}, for any segment over a file the manager mapped (a view passed to a copy). */
    public static void failIfTruncated(Throwable failure, MemorySegment segment) {
        FileMappings.Mapping mapping = FileMappings.find(segment);
        if (mapping != null) {
            failIfTruncated(failure, mapping.file(), mapping.fileOffset(), mapping.byteSize());
        }
    }

    /**
     * After a call that touched a buffer mapped over {@code mine}, one mapped over {@code second}, or {@code other} (a
     * segment that may lie over a mapping): makes a fault the JVM delivers late (once the JIT has compiled a copy)
     * arrive now, inside the call ({@link FileMappings#surfaceFaults}). Nothing to do where no file is involved.
     */
    static void surfaceFaults(@Nullable FileRange mine, @Nullable FileRange second, @Nullable MemorySegment other) {
        if (mine != null || second != null || (other != null && FileMappings.isOverMapping(other))) {
            FileMappings.surfaceFaults();
        }
    }

    /**
     * {@link #failIfTruncated(Throwable)} for each of a call's files that is there: the buffers' and {@code other}'s.
     * Where none is shorter now, yet the call met a memory fault, the file it faulted on is no longer there to measure
     * (deleted, or another renamed over it), so the first of them is named.
     */
    static void failIfTruncated(Throwable failure, @Nullable FileRange mine, @Nullable FileRange second, @Nullable MemorySegment other) {
        FileMappings.Mapping otherMapping = other == null ? null : FileMappings.find(other);
        if (otherMapping != null) {
            failIfTruncated(failure, otherMapping.file(), otherMapping.fileOffset(), otherMapping.byteSize());
        }
        if (mine != null) {
            mine.failIfTruncated(failure);
        }
        if (second != null) {
            second.failIfTruncated(failure);
        }
        if (failure instanceof MappedFileTruncatedException || !causedByMemoryFault(failure)
                || (other != null && otherMapping == null && other.isMapped())) { // the fault may be of the caller's own mapping
            return;
        }
        if (otherMapping != null) {
            throw truncatedAndGone(failure, otherMapping.file(), otherMapping.fileOffset(), otherMapping.byteSize());
        }
        FileRange range = mine != null ? mine : second;
        if (range != null) {
            throw truncatedAndGone(failure, range.file, range.offset, range.length);
        }
    }

    private static MappedFileTruncatedException truncatedAndGone(Throwable failure, Path file, long offset, long length) {
        return new MappedFileTruncatedException("a read or write of the mapping of bytes [" + offset + ", " + (offset + length) + ") of "
                + file + " met no file behind it: the file was truncated while mapped, and what its name holds now (nothing, or"
                + " another file) cannot say by how much. Replace a mapped file by renaming a new one over it rather than"
                + " rewriting it in place.", file, failure);
    }

    private static void failIfTruncated(Throwable failure, Path file, long offset, long length) {
        if (failure instanceof MappedFileTruncatedException || !causedByMemoryFault(failure)) {
            return;
        }
        long size;
        try {
            size = Files.size(file);
        } catch (IOException noLongerThere) {
            return; // deleted or moved: a mapping outlives its name, which says nothing now (the caller names the file as gone)
        }
        if (size < offset + length) {
            throw new MappedFileTruncatedException(file + " is " + size + " bytes now, shorter than its mapping of bytes [" + offset
                    + ", " + (offset + length) + "): it was truncated while mapped, and the bytes past its end cannot be read or"
                    + " written. Replace a mapped file by renaming a new one over it rather than rewriting it in place.", file, failure);
        }
    }

    private static boolean causedByMemoryFault(Throwable failure) {
        for (Throwable t = failure; t != null; t = t.getCause()) {
            if (t instanceof InternalError) {
                return true;
            }
        }
        return false;
    }

    @Override
    public String toString() {
        return "mapped " + (readOnly() ? "read-only" : "read-write") + " from " + file
                + (offset == 0 ? "" : " at byte " + offset);
    }
}
