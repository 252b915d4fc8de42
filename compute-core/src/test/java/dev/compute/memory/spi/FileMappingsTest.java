package dev.compute.memory.spi;

import static org.assertj.core.api.Assertions.assertThat;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class FileMappingsTest {

    @TempDir
    Path dir;

    @Test
    void aSegmentOverARegisteredMappingIsKnownWhateverArenaItLivesIn() throws Exception {
        Path file = Files.write(dir.resolve("data.bin"), new byte[8192]);
        try (Arena arena = Arena.ofShared(); FileChannel channel = FileChannel.open(file, StandardOpenOption.READ);
             Arena views = Arena.ofConfined()) {
            MemorySegment mapping = channel.map(FileChannel.MapMode.READ_ONLY, 0, 8192, arena);
            MemorySegment view = mapping.asSlice(4096, 100).reinterpret(views, null); // as a manager's view: not isMapped()
            assertThat(view.isMapped()).isFalse();
            assertThat(FileMappings.isOverMapping(view)).as("unregistered").isFalse();

            FileMappings.Mapping registered = FileMappings.register(mapping, file, 0);
            try {
                assertThat(FileMappings.isOverMapping(view)).isTrue();
                assertThat(FileMappings.find(view)).isNotNull().satisfies(found -> {
                    assertThat(found.file()).isEqualTo(file);
                    assertThat(found.byteSize()).isEqualTo(8192);
                });
                assertThat(FileMappings.isOverMapping(MemorySegment.ofArray(new byte[4]))).as("a heap segment").isFalse();
                try (Arena other = Arena.ofConfined()) {
                    assertThat(FileMappings.isOverMapping(other.allocate(64))).as("memory of its own").isFalse();
                }
                assertThat(FileMappings.isOverMapping(mapping)).isTrue();
            } finally {
                FileMappings.unregister(registered);
            }
            assertThat(FileMappings.isOverMapping(view)).as("once unregistered").isFalse();
            assertThat(FileMappings.isOverMapping(mapping)).as("its own mapping still says so").isTrue();
        }
    }

    @Test
    void surfacingFaultsWithNonePendingDoesNothing() {
        FileMappings.surfaceFaults();
    }
}
