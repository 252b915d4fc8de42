package dev.compute.memory.manager;

import dev.compute.memory.DataType;
import dev.compute.memory.FileMapMode;
import dev.compute.memory.MappedFileStatistics;
import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import org.jspecify.annotations.Nullable;

/**
 * The files one manager has mapped: it maps them, holds the limit on how many may be mapped at once
 * ({@code compute.memory.mapped-files.max-open}), keeps their figures apart from the pools', and unmaps each when its
 * buffer gives it back (at once, or once the device work recorded on it has completed) or when the manager closes.
 *
 * <p>Why a limit on the count and none on the bytes: a mapping holds no memory of its own (the operating system pages
 * the file in and out of its page cache as it does for any read), and a 64-bit address space has room for far more
 * than any disk; but every mapping is an entry in the process's memory map, of which Linux allows 65530 by default
 * ({@code vm.max_map_count}), and a JVM that runs out of them fails to start threads or to grow its heap. Buffers
 * that are never closed (only some are found out as leaks, and only when the garbage collector runs) would get there.
 *
 * <p>Thread-safe. Mapping and unmapping are system calls and happen outside the lock, which guards the figures only.
 */
public final class MappedFiles {

    private final int maxOpen;
    private final Set<MappedFile> open = ConcurrentHashMap.newKeySet();
    // guarded by this
    /** Mapped, and being mapped: what the limit counts. */
    private int slotsTaken;
    private long openMappings;
    private long mappedBytes;
    private long mappedBytesPeak;
    private long mappings;

    public MappedFiles(int maxOpen) {
        this.maxOpen = maxOpen;
    }

    /** Maps a range of a file (see {@link MappedFile#map}), within the limit. */
    public MappedFile map(Path file, DataType type, FileMapMode mode, long offset, @Nullable Long length, @Nullable String site) throws IOException {
        takeSlot(file);
        MappedFile mapped = null;
        try {
            mapped = MappedFile.map(file, type, mode, offset, length, site);
        } finally {
            if (mapped == null) {
                synchronized (this) {
                    slotsTaken--;
                }
            }
        }
        synchronized (this) {
            openMappings++;
            mappedBytes += mapped.size();
            mappedBytesPeak = Math.max(mappedBytesPeak, mappedBytes);
            mappings++;
        }
        open.add(mapped);
        return mapped;
    }

    private synchronized void takeSlot(Path file) {
        if (slotsTaken >= maxOpen) {
            throw new IllegalStateException(maxOpen == 0
                    ? "mapping files is turned off (compute.memory.mapped-files.max-open=0); cannot map " + file
                    : "cannot map " + file + ": " + slotsTaken + " files are mapped, the most compute.memory.mapped-files.max-open ("
                    + maxOpen + ") allows; close mapped buffers no longer needed (manager.liveBuffers() lists them), or raise it");
        }
        slotsTaken++;
    }

    private synchronized void unmapped(long bytes) {
        slotsTaken--;
        openMappings--;
        mappedBytes -= bytes;
    }

    /** A buffer gave its mapping back: unmapped once {@code inFlight} (device work that reads or writes it) completes. */
    void release(MappedFile mapping, CompletableFuture<?> inFlight) {
        mapping.markReleased();
        if (inFlight.isDone()) {
            unmap(mapping);
        } else {
            inFlight.whenComplete((result, failure) -> unmap(mapping));
        }
    }

    private void unmap(MappedFile mapping) {
        if (mapping.unmap()) {
            open.remove(mapping);
            unmapped(mapping.size());
        }
    }

    /** The manager frees everything: unmaps what is still mapped, buffers left open included. */
    void unmapAll() {
        for (MappedFile mapping : open) {
            unmap(mapping);
        }
    }

    /** What is mapped now, for the manager's list of open buffers. */
    List<MappedFile> open() {
        return List.copyOf(open);
    }

    public synchronized MappedFileStatistics statistics() {
        return new MappedFileStatistics(openMappings, mappedBytes, mappedBytesPeak, mappings, maxOpen);
    }
}
