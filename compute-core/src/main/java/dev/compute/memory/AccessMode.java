package dev.compute.memory;

/** What an access to a buffer's memory may do: read it, write it, or both. */
public enum AccessMode {
    /** Reads only: the copy read is brought up to date first and nothing becomes newer. */
    READ,
    /**
     * Writes: the copy written becomes the newer one. The other copy is still brought over first, so bytes that
     * are not written keep their values.
     */
    WRITE,
    /** Reads and writes. */
    READ_WRITE;

    public boolean writes() {
        return this != READ;
    }
}
