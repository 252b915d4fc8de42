package dev.compute.memory.lifetime;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.FileMapMode;
import dev.compute.memory.MappedFileTruncatedException;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** A fault of a memory access is named a truncation only when it is one: the file is now shorter than its mapping. */
class FileRangeTest {

    private static final InternalError FAULT = new InternalError("a fault occurred in an unsafe memory access operation");

    @TempDir
    Path dir;

    @Test
    void aFaultOnAFileNowShorterThanItsMappingIsATruncation() throws IOException {
        Path file = Files.write(dir.resolve("short.bin"), new byte[100]);
        FileRange range = new FileRange(file, FileMapMode.READ_ONLY, 64, 64);
        assertThatThrownBy(() -> range.failIfTruncated(FAULT)).isInstanceOfSatisfying(MappedFileTruncatedException.class, e -> {
            assertThat(e.file()).isEqualTo(file);
            assertThat(e.getCause()).isSameAs(FAULT);
            assertThat(e).hasMessageStartingWith(file + " is 100 bytes now, shorter than its mapping of bytes [64, 128)");
        });
        IllegalStateException wrapped = new IllegalStateException("a host copy part failed", FAULT);
        assertThatThrownBy(() -> range.failIfTruncated(wrapped)).as("a fault on another thread, wrapped")
                .isInstanceOf(MappedFileTruncatedException.class).hasCause(wrapped);
    }

    @Test
    void anythingElseIsLeftAsItIs() throws IOException {
        Path file = Files.write(dir.resolve("whole.bin"), new byte[128]);
        FileRange whole = new FileRange(file, FileMapMode.READ_WRITE, 64, 64);
        assertThatCode(() -> whole.failIfTruncated(FAULT)).as("the file is long enough").doesNotThrowAnyException();
        FileRange shorter = new FileRange(file, FileMapMode.READ_ONLY, 0, 4096);
        assertThatCode(() -> shorter.failIfTruncated(new IllegalStateException("closed"))).as("no memory fault").doesNotThrowAnyException();
        assertThatCode(() -> shorter.failIfTruncated(new MappedFileTruncatedException("named already", file, FAULT)))
                .doesNotThrowAnyException();
        FileRange gone = new FileRange(dir.resolve("deleted.bin"), FileMapMode.READ_ONLY, 0, 4096);
        assertThatCode(() -> gone.failIfTruncated(FAULT)).as("a mapping outlives its name").doesNotThrowAnyException();
    }

    @Test
    void itSaysHowAndWhereItWasMapped() {
        assertThat(new FileRange(Path.of("/data/a.bin"), FileMapMode.READ_ONLY, 0, 8)).hasToString("mapped read-only from /data/a.bin");
        assertThat(new FileRange(Path.of("/data/a.bin"), FileMapMode.READ_WRITE, 4096, 8))
                .hasToString("mapped read-write from /data/a.bin at byte 4096");
    }
}
