package dev.compute.memory;

import java.nio.file.Path;

/**
 * A copy or an op on a mapped file's buffer met the end of the file inside the mapping: the file was made shorter
 * (truncated, by this process or another) after it was mapped. The bytes past the new end are gone; a copy stopped
 * where it met them, so what it had written until then is undefined. The buffer stays usable over what is left of
 * the file. Only Java's own accesses can be caught so: see {@link UnifiedMemoryManager#mapFile} for native code.
 */
public class MappedFileTruncatedException extends ComputeMemoryException {

    private final Path file;

    public MappedFileTruncatedException(String message, Path file, Throwable cause) {
        super(message, cause);
        this.file = file;
    }

    /** The file that became shorter than its mapping. */
    public Path file() {
        return file;
    }
}
