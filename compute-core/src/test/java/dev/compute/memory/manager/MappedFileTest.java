package dev.compute.memory.manager;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.compute.memory.DataType;
import dev.compute.memory.FileMapMode;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.lifetime.FileRange;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.ClosedByInterruptException;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** One mapped range as a block: what it maps, how a request is checked against the file, and its unmapping. */
class MappedFileTest {

    @TempDir
    Path dir;

    @Test
    void aRangeAtAnElementMultipleIsAlignedAndHoldsTheFilesBytes() throws IOException {
        ByteBuffer content = ByteBuffer.allocate(4096 + 64).order(ByteOrder.nativeOrder());
        for (int i = 0; i < content.capacity() / 8; i++) {
            content.putLong(i);
        }
        Path file = Files.write(dir.resolve("longs.bin"), content.array());
        MappedFile mapped = MappedFile.map(file, DataType.INT64, FileMapMode.READ_ONLY, 24, 4096L, null);
        assertThat(mapped.segment().location()).isEqualTo(MemoryLocation.HOST);
        assertThat(mapped.segment().address() % 8).as("aligned as the element size asks").isZero();
        assertThat(mapped.segment().address()).isEqualTo(mapped.segment().hostSegment().address());
        assertThat(mapped.offset()).isZero();
        assertThat(mapped.size()).isEqualTo(4096);
        assertThat(mapped.requestedSize()).isEqualTo(4096);
        assertThat(mapped.segment().hostSegment().isReadOnly()).isTrue();
        assertThat(mapped.segment().hostSegment().getAtIndex(ValueLayout.JAVA_LONG, 0)).isEqualTo(3);
        assertThat(mapped.range()).isEqualTo(new FileRange(file, FileMapMode.READ_ONLY, 24, 4096));
        assertThat(mapped.unmap()).isTrue();
        assertThat(mapped.unmap()).as("once").isFalse();
    }

    /**
     * A thread whose interrupt flag is set (a cancelled task's) met the file channel's ClosedByInterruptException, which
     * has no message: the failure named neither the file nor why. It still fails so, the interrupt kept, but says both.
     */
    @Test
    void aMappingOnAnInterruptedThreadNamesTheFileAndKeepsTheInterrupt() throws IOException {
        Path file = Files.write(dir.resolve("floats.bin"), new byte[4096]);
        Thread.currentThread().interrupt();
        try {
            assertThatThrownBy(() -> MappedFile.map(file, DataType.FLOAT32, FileMapMode.READ_ONLY, 0, null, null))
                    .isInstanceOf(ClosedByInterruptException.class).hasMessageContaining(file.toString())
                    .hasMessageContaining("interrupted");
            assertThat(Thread.currentThread().isInterrupted()).as("the interrupt, kept").isTrue();
        } finally {
            Thread.interrupted();
        }
    }

    /**
     * Another process may truncate a file between mapFile's look at its size and the mapping itself: the channel's map
     * then failed with its own words, "Channel not open for writing - cannot extend file to required size", which
     * mapFile's failure put down to a file system that may not map files. It is the range outside the file, as when the
     * file was short before mapFile looked, and says so.
     */
    @Test
    void aFileTruncatedWhileItIsBeingMappedIsRefusedAsARangeOutsideIt() throws Exception {
        int bytes = 1 << 20;
        Path file = Files.write(dir.resolve("shrinking.bin"), new byte[bytes]);
        AtomicBoolean done = new AtomicBoolean();
        Thread truncating = Thread.ofPlatform().start(() -> {
            try (FileChannel channel = FileChannel.open(file, StandardOpenOption.WRITE)) {
                while (!done.get()) {
                    channel.truncate(bytes / 2);
                    channel.write(ByteBuffer.allocate(bytes / 2), bytes / 2);
                }
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        });
        int refusedOutside = 0;
        try {
            for (int i = 0; i < 10_000; i++) {
                try {
                    MappedFile.map(file, DataType.INT8, FileMapMode.READ_ONLY, 0, (long) bytes, null).unmap();
                } catch (IllegalArgumentException outside) {
                    assertThat(outside).hasMessageContaining("are outside " + file);
                    refusedOutside++;
                }
            }
        } finally {
            done.set(true);
            truncating.join();
        }
        assertThat(refusedOutside).as("the file was short at some mappings").isPositive();
    }

    /**
     * A regular file whose file system cannot map it (sysfs's attributes: 4096 bytes, read as text) failed with the
     * system's words alone, "No such device", naming no file, where every other refusal of mapFile names it.
     */
    @Test
    void aFileItsFileSystemCannotMapIsNamedInTheFailure() {
        Path attribute = Stream.of("/sys/devices/system/cpu/online", "/sys/kernel/mm/transparent_hugepage/enabled").map(Path::of)
                .filter(Files::isRegularFile).findFirst().orElse(null);
        assumeTrue(attribute != null, "no sysfs attribute to map here");
        assertThatThrownBy(() -> MappedFile.map(attribute, DataType.INT8, FileMapMode.READ_ONLY, 0, null, null))
                .isInstanceOf(IOException.class).hasMessageStartingWith("cannot map " + attribute)
                .hasMessageContaining("its file system may not map files");
    }

    @Test
    void aRangeWhoseEndPassesLongMaxValueIsRefusedWithoutANegativeEnd() throws IOException {
        // the message said "bytes [5, -9223372036854775804) are outside": the end overflowed
        Path file = Files.write(dir.resolve("ten.bin"), new byte[10]);
        assertThatThrownBy(() -> MappedFile.map(file, DataType.INT8, FileMapMode.READ_ONLY, 5, Long.MAX_VALUE, null))
                .isInstanceOf(IllegalArgumentException.class).hasMessage("bytes [5, 5 + " + Long.MAX_VALUE + ") are outside " + file
                        + ", which has 10 bytes; a mapping never extends a file: set its length first");
    }

    @Test
    void aWholeFileMustBeWholeElementsAndARangeMustLieInIt() throws IOException {
        Path file = Files.write(dir.resolve("six.bin"), new byte[6]);
        assertThatThrownBy(() -> MappedFile.map(file, DataType.INT32, FileMapMode.READ_ONLY, 0, null, null))
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessage("the 6 bytes of " + file + " are not a positive whole number of INT32 elements (4 bytes each);"
                        + " map a range of it with mapFile(file, type, mode, offset, length)");
        assertThatThrownBy(() -> MappedFile.map(file, DataType.INT16, FileMapMode.READ_ONLY, 2, 3L, null))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("a length of 3 bytes is not a positive whole number");
        assertThatThrownBy(() -> MappedFile.map(file, DataType.INT16, FileMapMode.READ_ONLY, 4, 4L, null))
                .isInstanceOf(IllegalArgumentException.class).hasMessage("bytes [4, 8) are outside " + file
                        + ", which has 6 bytes; a mapping never extends a file: set its length first");
        assertThatThrownBy(() -> MappedFile.map(file, DataType.INT8, FileMapMode.READ_ONLY, 6, null, null))
                .isInstanceOf(IllegalArgumentException.class).hasMessage(file + " has 6 bytes, nothing to map from byte 6");
        assertThatThrownBy(() -> MappedFile.map(dir, DataType.INT8, FileMapMode.READ_ONLY, 0, null, null))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("not a regular file");
        MappedFile all = MappedFile.map(file, DataType.INT16, FileMapMode.READ_WRITE, 0, null, null);
        assertThat(all.size()).isEqualTo(6);
        all.unmap();
        assertThat(Files.size(file)).isEqualTo(6);
    }
}
