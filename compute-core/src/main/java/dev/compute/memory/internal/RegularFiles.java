package dev.compute.memory.internal;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;

/**
 * Refuses what is not a regular file before it is opened: opening a named pipe blocks until its other end opens
 * (for ever, if nobody does), and a device or a directory is nothing the library can map or write a trace to.
 */
public final class RegularFiles {

    private RegularFiles() {}

    /** {@code file} exists and is a regular file (after links); otherwise an {@link IllegalArgumentException} or the I/O error. */
    public static void require(Path file, String use) throws IOException {
        BasicFileAttributes attributes = Files.readAttributes(file, BasicFileAttributes.class);
        if (!attributes.isRegularFile()) {
            throw notRegular(file, attributes, use);
        }
    }

    /** As {@link #require}, where a file that does not exist yet is fine (it will be created). */
    public static void requireIfPresent(Path file, String use) throws IOException {
        try {
            require(file, use);
        } catch (NoSuchFileException absent) {
            // created when it is opened
        }
    }

    private static IllegalArgumentException notRegular(Path file, BasicFileAttributes attributes, String use) {
        String kind = attributes.isDirectory() ? "a directory" : "a named pipe, socket or device";
        return new IllegalArgumentException(file + " is " + kind + ", not a regular file; only regular files can be " + use);
    }
}
