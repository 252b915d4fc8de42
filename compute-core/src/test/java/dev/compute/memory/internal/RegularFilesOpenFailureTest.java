package dev.compute.memory.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.compute.memory.DataType;
import dev.compute.memory.FileMapMode;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import java.nio.file.AccessDeniedException;
import java.nio.file.FileSystemException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** A regular file the system will not open as asked is refused with the system's reason, not "it changed". */
class RegularFilesOpenFailureTest {

    @TempDir
    Path dir;

    /** The running JVM's executable cannot be opened for writing on Linux: busy (ETXTBSY) for root, denied for anyone else. */
    @Test
    void mappingTheRunningExecutableReadWriteSaysWhyItCannotBeOpened() {
        assumeTrue(System.getProperty("os.name").startsWith("Linux"));
        Path java = Path.of(ProcessHandle.current().info().command().orElseThrow()).toAbsolutePath();
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend())
                .timelineInterval(Duration.ZERO).trimInterval(Duration.ZERO).build()) {
            assertThatThrownBy(() -> manager.mapFile(java, DataType.INT8, FileMapMode.READ_WRITE))
                    .isInstanceOf(FileSystemException.class)
                    .hasMessageNotContaining("changed while it was opened")
                    .satisfiesAnyOf(busy -> assertThat(busy).hasMessageContaining("busy"), // root: ETXTBSY
                            denied -> assertThat(denied).isInstanceOf(AccessDeniedException.class)); // anyone else: EACCES first
            assertThat(manager.mappedFileStatistics().openMappings()).isZero();
        }
    }

    /** A read-only file opened for writing by a user without the right is an AccessDeniedException, as FileChannel.open says. */
    @Test
    void aFileWithoutWritePermissionIsAccessDenied() throws Exception {
        Path file = Files.write(dir.resolve("ro.bin"), new byte[64]);
        Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("r--r--r--"));
        assumeTrue(!Files.isWritable(file), "root may write any file");
        assertThatThrownBy(() -> RegularFiles.open(file, Set.of(StandardOpenOption.READ, StandardOpenOption.WRITE), "mapped"))
                .isInstanceOf(AccessDeniedException.class);
    }
}
