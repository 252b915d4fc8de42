package dev.compute.memory;

/** How {@link UnifiedMemoryManager#mapFile} maps a file: for reading only, or for reading and writing it in place. */
public enum FileMapMode {
    /**
     * The buffer's bytes are the file's and cannot be changed: every write through the buffer (a copy into it, an op
     * that writes, a writing view or access) fails with an {@link UnsupportedOperationException} before it touches
     * the memory. The file needs only read permission.
     */
    READ_ONLY,
    /**
     * Writes through the buffer change the file: other readers of the file see them at once (they are in the
     * operating system's page cache), and the system writes them to disk later; {@code FileChannel.force} (or
     * {@code fsync}) on the file puts them on disk. The file needs read and write permission.
     */
    READ_WRITE
}
