package dev.compute.memory.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Set;
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
        assertThatThrownBy(() -> RegularFiles.open(fifo, Set.of(StandardOpenOption.WRITE, StandardOpenOption.CREATE), "written a trace to"))
                .isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> RegularFiles.open(fifo, Set.of(StandardOpenOption.READ), "mapped")).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("named pipe");
        assertThatThrownBy(() -> RegularFiles.require(dir, "mapped")).hasMessageContaining("a directory");
        assertThatThrownBy(() -> RegularFiles.require(Path.of("/dev/null"), "mapped")).hasMessageContaining("device");
    }

    @Test
    void aMissingFileIsAnErrorUnlessItMayBeCreated() throws Exception {
        Path missing = dir.resolve("missing");
        assertThatThrownBy(() -> RegularFiles.require(missing, "mapped")).isInstanceOf(NoSuchFileException.class);
        assertThatThrownBy(() -> RegularFiles.open(missing, Set.of(StandardOpenOption.READ), "mapped")).isInstanceOf(NoSuchFileException.class);
        try (FileChannel created = RegularFiles.open(missing, Set.of(StandardOpenOption.WRITE, StandardOpenOption.CREATE), "written a trace to")) {
            created.write(ByteBuffer.wrap(new byte[] {1, 2, 3}));
        }
        assertThat(Files.readAllBytes(missing)).containsExactly(1, 2, 3);
    }

    @Test
    void aRegularFileOpensForReadingAndForWritingItsOwnBytes() throws Exception {
        Path file = Files.write(dir.resolve("data.bin"), new byte[] {7, 8, 9});
        try (FileChannel channel = RegularFiles.open(file, Set.of(StandardOpenOption.READ), "mapped")) {
            ByteBuffer read = ByteBuffer.allocate(3);
            channel.read(read);
            assertThat(read.array()).containsExactly(7, 8, 9);
        }
        try (FileChannel channel = RegularFiles.open(file, Set.of(StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING), "written to")) {
            channel.write(ByteBuffer.wrap(new byte[] {1}));
        }
        assertThat(Files.readAllBytes(file)).containsExactly(1);
    }
}
