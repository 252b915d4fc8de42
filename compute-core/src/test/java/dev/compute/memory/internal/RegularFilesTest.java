package dev.compute.memory.internal;

import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class RegularFilesTest {

    @TempDir
    Path dir;

    @Test
    void aRegularFileAndALinkToOnePass() throws Exception {
        Path file = Files.write(dir.resolve("data.bin"), new byte[16]);
        Path link = Files.createSymbolicLink(dir.resolve("link"), file);
        assertThatCode(() -> RegularFiles.require(file, "mapped")).doesNotThrowAnyException();
        assertThatCode(() -> RegularFiles.require(link, "mapped")).doesNotThrowAnyException();
    }

    @Test
    void aNamedPipeADirectoryAndADeviceAreRefusedSayingWhatTheyAre() throws Exception {
        Path fifo = dir.resolve("pipe");
        new ProcessBuilder("mkfifo", fifo.toString()).inheritIO().start().waitFor();
        assertThatThrownBy(() -> RegularFiles.require(fifo, "mapped")).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("named pipe").hasMessageContaining("only regular files can be mapped");
        assertThatThrownBy(() -> RegularFiles.requireIfPresent(fifo, "written a trace to")).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> RegularFiles.require(dir, "mapped")).hasMessageContaining("a directory");
        assertThatThrownBy(() -> RegularFiles.require(Path.of("/dev/null"), "mapped")).hasMessageContaining("device");
    }

    @Test
    void aMissingFileIsAnErrorUnlessItMayBeCreated() {
        Path missing = dir.resolve("missing");
        assertThatThrownBy(() -> RegularFiles.require(missing, "mapped")).isInstanceOf(NoSuchFileException.class);
        assertThatCode(() -> RegularFiles.requireIfPresent(missing, "written a trace to")).doesNotThrowAnyException();
    }
}
