package dev.compute.memory.contract;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.tuple;
import static org.assertj.core.api.Assertions.within;

import dev.compute.memory.AccessMode;
import dev.compute.memory.BufferAccess;
import dev.compute.memory.BufferState;
import dev.compute.memory.DataType;
import dev.compute.memory.FileMapMode;
import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.LiveBufferReport;
import dev.compute.memory.MappedFileStatistics;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.UnifiedMemoryManagerBuilder;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.Random;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Files mapped as buffers ({@link UnifiedMemoryManager#mapFile}) on a backend, through the manager a user holds: the
 * file's bytes as a HOST buffer, streamed to DEVICE memory through small staging buffers, written in place when mapped
 * read-write, figures apart from the pools, the lifetime rule. A backend module subclasses this and says how to build a
 * manager on it; what could crash the JVM when it fails is in {@link MappedFileSafetyContractTest}, run in JVMs of its own.
 */
public abstract class MappedFileContractTest {

    /** Small staging buffers, so that a modest file already takes several, and a chunk that does not divide it. */
    protected static final long STAGING_BYTES = 64 << 10;
    /** Five staging buffers and a bit: whole FLOAT32 and FLOAT64 elements. */
    protected static final int FILE_BYTES = (int) (5 * STAGING_BYTES + 24);

    @TempDir
    protected Path dir;
    protected UnifiedMemoryManager manager;
    private final Random random = new Random(7);

    /** A builder for the backend under test; the contract sets the staging buffer, leak detection and sampling itself. */
    protected abstract UnifiedMemoryManagerBuilder builder();

    /** Whether the backend's ops run on HOST memory (every backend of this project does: CUDA's on the host). */
    protected boolean opsRunOnHostMemory() {
        return true;
    }

    @BeforeEach
    void openManager() {
        manager = builder().stagingBufferSize(STAGING_BYTES).leakDetection(LeakDetectionLevel.PARANOID)
                .timelineInterval(Duration.ZERO).trimInterval(Duration.ZERO).build();
    }

    @AfterEach
    void closeManager() {
        if (manager != null) {
            manager.close();
        }
    }

    @Test
    void aMappedFileIsAHostBufferOfTheFilesBytes() throws IOException {
        byte[] content = randomBytes(FILE_BYTES);
        Path file = write("data.bin", content);
        try (UnifiedBuffer mapped = manager.mapFile(file, DataType.FLOAT32, FileMapMode.READ_ONLY)) {
            assertThat(mapped.location()).isEqualTo(MemoryLocation.HOST);
            assertThat(mapped.isHostAccessible()).isTrue();
            assertThat(mapped.byteSize()).isEqualTo(FILE_BYTES);
            assertThat(mapped.elementCount()).isEqualTo(FILE_BYTES / 4);
            assertThat(mapped.state()).as("the file's bytes are data from the start").isEqualTo(BufferState.SYNCHRONIZED);
            assertThat(mapped.mappedFile()).isEqualTo(file);
            assertThat(mapped.isReadOnly()).isTrue();
            assertThat(mapped.toString()).contains("mapped read-only from " + file);

            byte[] back = new byte[FILE_BYTES];
            mapped.copyTo(back);
            assertThat(back).isEqualTo(content);
            assertThat(mapped.readOnlyHostView().toArray(ValueLayout.JAVA_BYTE)).isEqualTo(content);
            try (BufferAccess access = mapped.hostAccess(AccessMode.READ)) {
                assertThat(access.segment().get(ValueLayout.JAVA_BYTE, FILE_BYTES - 1)).isEqualTo(content[FILE_BYTES - 1]);
            }
            try (UnifiedBuffer slice = mapped.slice(1000, 16)) {
                assertThat(slice.isReadOnly()).isTrue();
                assertThat(slice.mappedFile()).isEqualTo(file);
                byte[] part = new byte[64];
                slice.copyTo(part);
                assertThat(part).isEqualTo(Arrays.copyOfRange(content, 4000, 4064));
            }
        }
    }

    @Test
    void aRangeOfAFileMapsFromItsOffset() throws IOException {
        byte[] content = randomBytes(FILE_BYTES);
        Path file = write("range.bin", content);
        long offset = 3 * 4096 + 8; // not on a page: the mapping's start is still the byte asked for
        int length = 40_000;
        try (UnifiedBuffer mapped = manager.mapFile(file, DataType.FLOAT64, FileMapMode.READ_ONLY, offset, length)) {
            assertThat(mapped.elementCount()).isEqualTo(length / 8);
            byte[] back = new byte[length];
            mapped.copyTo(back);
            assertThat(back).isEqualTo(Arrays.copyOfRange(content, (int) offset, (int) offset + length));
        }
    }

    @Test
    void aFileOfManyStagingBuffersStreamsToTheDeviceByteForByte() throws IOException {
        byte[] content = randomBytes(FILE_BYTES);
        Path file = write("to-device.bin", content);
        try (UnifiedBuffer mapped = manager.mapFile(file, DataType.INT8, FileMapMode.READ_ONLY);
             UnifiedBuffer device = manager.allocate(FILE_BYTES + 100, MemoryLocation.DEVICE)) {
            long copiedBefore = manager.statistics(MemoryLocation.DEVICE).bytesHostToDevice();
            device.copyFrom(mapped, 0, 100, FILE_BYTES);
            byte[] back = new byte[FILE_BYTES];
            device.copyTo(100, back, 0, FILE_BYTES);
            assertThat(back).isEqualTo(content);
            assertThat(manager.statistics(MemoryLocation.DEVICE).bytesHostToDevice() - copiedBefore).isEqualTo(FILE_BYTES);
        }
        try (UnifiedBuffer mapped = manager.mapFile(file, DataType.INT8, FileMapMode.READ_ONLY, 4096, FILE_BYTES - 4096);
             UnifiedBuffer device = manager.allocate(FILE_BYTES - 4096, MemoryLocation.DEVICE)) {
            device.copyFrom(mapped);
            byte[] back = new byte[FILE_BYTES - 4096];
            device.copyTo(back);
            assertThat(back).isEqualTo(Arrays.copyOfRange(content, 4096, FILE_BYTES));
        }
    }

    @Test
    void deviceDataLandsInAFileMappedReadWrite() throws IOException {
        byte[] results = randomBytes(FILE_BYTES);
        Path file = write("results.bin", new byte[FILE_BYTES]);
        try (UnifiedBuffer device = manager.allocate(FILE_BYTES, MemoryLocation.DEVICE);
             UnifiedBuffer mapped = manager.mapFile(file, DataType.INT8, FileMapMode.READ_WRITE)) {
            assertThat(mapped.isReadOnly()).isFalse();
            device.copyFrom(results);
            mapped.copyFrom(device);
            // other readers of the file see the bytes at once: they are in the page cache, before any write-back
            assertThat(Files.readAllBytes(file)).isEqualTo(results);
        }
        assertThat(Files.readAllBytes(file)).isEqualTo(results);
    }

    @Test
    void writesThroughAReadWriteMappingChangeTheFile() throws IOException {
        Path file = write("rw.bin", new byte[FILE_BYTES]);
        double[] values = {1.5, -2.0, 3.25};
        try (UnifiedBuffer mapped = manager.mapFile(file, DataType.FLOAT64, FileMapMode.READ_WRITE)) {
            mapped.copyFrom(values);
            mapped.hostView().setAtIndex(ValueLayout.JAVA_DOUBLE_UNALIGNED, 3, 42.0);
            try (BufferAccess access = mapped.hostAccess(AccessMode.WRITE)) {
                access.segment().setAtIndex(ValueLayout.JAVA_DOUBLE_UNALIGNED, 4, -7.0);
            }
            if (opsRunOnHostMemory()) {
                try (UnifiedBuffer tail = mapped.slice(5, mapped.elementCount() - 5)) {
                    manager.ops().fill(tail, 0.5);
                }
            }
        }
        ByteBuffer written = ByteBuffer.wrap(Files.readAllBytes(file)).order(ByteOrder.nativeOrder());
        assertThat(new double[] {written.getDouble(0), written.getDouble(8), written.getDouble(16), written.getDouble(24), written.getDouble(32)})
                .containsExactly(1.5, -2.0, 3.25, 42.0, -7.0);
        if (opsRunOnHostMemory()) {
            assertThat(written.getDouble(FILE_BYTES - 8)).isEqualTo(0.5);
        }
    }

    @Test
    void opsReadAMappedFileWhereTheBackendRunsOpsOnHostMemory() throws IOException {
        int n = FILE_BYTES / 8;
        ByteBuffer content = ByteBuffer.allocate(n * 8).order(ByteOrder.nativeOrder());
        double expected = 0;
        for (int i = 0; i < n; i++) {
            double value = random.nextDouble();
            content.putDouble(value);
            expected += value;
        }
        Path file = write("sum.bin", content.array());
        try (UnifiedBuffer mapped = manager.mapFile(file, DataType.FLOAT64, FileMapMode.READ_ONLY)) {
            if (opsRunOnHostMemory()) {
                assertThat(manager.ops().sum(mapped)).isCloseTo(expected, within(1e-9 * n));
            } else {
                assertThatThrownBy(() -> manager.ops().sum(mapped)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("HOST");
            }
            try (UnifiedBuffer device = manager.allocate(DataType.FLOAT64, n, MemoryLocation.DEVICE)) {
                device.copyFrom(mapped);
                assertThat(manager.ops().sum(device)).isCloseTo(expected, within(1e-9 * n));
            }
        }
    }

    @Test
    void aReadOnlyMappingRefusesWritesNamingTheFileAndStaysUnchanged() throws IOException {
        byte[] content = randomBytes(4096);
        Path file = write("ro.bin", content);
        try (UnifiedBuffer mapped = manager.mapFile(file, DataType.INT32, FileMapMode.READ_ONLY)) {
            assertThatThrownBy(() -> mapped.copyFrom(new int[] {1, 2, 3})).isInstanceOf(UnsupportedOperationException.class)
                    .hasMessageContaining("mapped read-only from " + file).hasMessageContaining("FileMapMode.READ_WRITE");
            assertThatThrownBy(mapped::hostView).isInstanceOf(UnsupportedOperationException.class)
                    .hasMessageContaining("hostView()").hasMessageContaining("readOnlyHostView()");
            MemorySegment view = mapped.readOnlyHostView();
            assertThatThrownBy(() -> view.set(ValueLayout.JAVA_BYTE, 0, (byte) 1)).as("the FFM API refuses it too")
                    .isInstanceOf(IllegalArgumentException.class);
            assertThat(mapped.state()).isEqualTo(BufferState.SYNCHRONIZED);
        }
        assertThat(Files.readAllBytes(file)).isEqualTo(content);
    }

    @Test
    void mappedFilesAreCountedApartFromThePoolsAndListedAsLiveBuffers() throws IOException {
        Path file = write("figures.bin", randomBytes(FILE_BYTES));
        long hostAllocated = manager.statistics(MemoryLocation.HOST).allocatedBytes();
        UnifiedBuffer first = manager.mapFile(file, DataType.INT8, FileMapMode.READ_ONLY);
        UnifiedBuffer second = manager.mapFile(file, DataType.INT8, FileMapMode.READ_ONLY, 0, 4096);
        assertThat(manager.mappedFileStatistics()).isEqualTo(new MappedFileStatistics(2, FILE_BYTES + 4096, FILE_BYTES + 4096, 2,
                UnifiedMemoryManagerBuilder.DEFAULT_MAX_OPEN_MAPPED_FILES));
        assertThat(manager.statistics(MemoryLocation.HOST).allocatedBytes()).isEqualTo(hostAllocated);
        assertThat(manager.statistics(MemoryLocation.HOST).liveBuffers()).isZero();
        assertThat(manager.liveBuffers()).filteredOn(live -> live.mappedFile() != null).hasSize(2)
                .extracting(LiveBufferReport::location, LiveBufferReport::sizeBytes, LiveBufferReport::mappedFile)
                .containsExactlyInAnyOrder(tuple(MemoryLocation.HOST, (long) FILE_BYTES, file), tuple(MemoryLocation.HOST, 4096L, file));
        assertThat(manager.liveBuffers()).filteredOn(live -> live.mappedFile() != null)
                .allSatisfy(live -> assertThat(live.allocationSite()).as("paranoid records where it was mapped")
                        .contains(MappedFileContractTest.class.getName()));
        first.close();
        assertThat(manager.mappedFileStatistics()).isEqualTo(new MappedFileStatistics(1, 4096, FILE_BYTES + 4096, 2,
                UnifiedMemoryManagerBuilder.DEFAULT_MAX_OPEN_MAPPED_FILES));
        second.close();
        assertThat(manager.mappedFileStatistics().openMappings()).isZero();
        assertThat(manager.mappedFileStatistics().mappedBytes()).isZero();
        assertThat(manager.liveBuffers()).noneMatch(live -> live.mappedFile() != null);
    }

    @Test
    void theFileIsUnmappedOnlyWhenTheLastHolderLetsGo() throws IOException {
        byte[] content = randomBytes(8192);
        Path file = write("held.bin", content);
        UnifiedBuffer mapped = manager.mapFile(file, DataType.INT8, FileMapMode.READ_ONLY);
        MemorySegment view = mapped.readOnlyHostView();
        BufferAccess access = mapped.hostAccess(AccessMode.READ);
        mapped.close();
        assertThat(mapped.isClosed()).isTrue();
        assertThatThrownBy(() -> mapped.copyTo(new byte[1])).isInstanceOf(IllegalStateException.class).hasMessageContaining("is closed");
        assertThatThrownBy(() -> view.get(ValueLayout.JAVA_BYTE, 0)).as("closing on this thread ended its view at once")
                .isInstanceOf(IllegalStateException.class);
        assertThat(manager.mappedFileStatistics().openMappings()).as("the open access still holds the mapping").isEqualTo(1);
        assertThat(access.segment().get(ValueLayout.JAVA_BYTE, 8191)).isEqualTo(content[8191]);
        access.close();
        assertThat(manager.mappedFileStatistics().openMappings()).isZero();
        mapped.close();
    }

    @Test
    void closingTheManagerUnmapsBuffersLeftOpenAndRefusesMore() throws IOException {
        Path file = write("left-open.bin", randomBytes(4096));
        UnifiedBuffer mapped = manager.mapFile(file, DataType.INT8, FileMapMode.READ_ONLY);
        manager.close();
        assertThat(mapped.isClosed()).isTrue();
        assertThatThrownBy(() -> mapped.copyTo(new byte[1])).isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("UnifiedMemoryManager was closed");
        assertThat(manager.mappedFileStatistics().openMappings()).isZero();
        assertThat(manager.liveBuffers()).isEmpty();
        assertThatThrownBy(() -> manager.mapFile(file, DataType.INT8, FileMapMode.READ_ONLY)).isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("closed");
        mapped.close();
    }

    @Test
    void badRequestsFailClearlyAndMapNothing() throws IOException {
        Path file = write("ten.bin", new byte[10]);
        assertThatThrownBy(() -> manager.mapFile(dir.resolve("absent.bin"), DataType.INT8, FileMapMode.READ_ONLY))
                .isInstanceOf(NoSuchFileException.class).hasMessageContaining("absent.bin");
        assertThatThrownBy(() -> manager.mapFile(dir, DataType.INT8, FileMapMode.READ_ONLY)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("not a regular file");
        assertThatThrownBy(() -> manager.mapFile(write("empty.bin", new byte[0]), DataType.INT8, FileMapMode.READ_ONLY))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("nothing to map");
        assertThatThrownBy(() -> manager.mapFile(file, DataType.FLOAT32, FileMapMode.READ_ONLY))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("not a positive whole number of FLOAT32 elements");
        assertThatThrownBy(() -> manager.mapFile(file, DataType.INT16, FileMapMode.READ_ONLY, 1, 4))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("multiple of 2 bytes");
        assertThatThrownBy(() -> manager.mapFile(file, DataType.INT8, FileMapMode.READ_ONLY, 4, 7))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("outside").hasMessageContaining("never extends");
        assertThatThrownBy(() -> manager.mapFile(file, DataType.INT8, FileMapMode.READ_WRITE, 0, 11))
                .as("a read-write mapping does not grow the file either").isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> manager.mapFile(file, DataType.INT8, FileMapMode.READ_ONLY, 0, 0))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("positive");
        assertThatThrownBy(() -> manager.mapFile(file, DataType.INT8, FileMapMode.READ_ONLY, -8, 2))
                .isInstanceOf(IllegalArgumentException.class);
        assertThat(Files.size(file)).isEqualTo(10);
        assertThat(manager.mappedFileStatistics()).isEqualTo(new MappedFileStatistics(0, 0, 0, 0,
                UnifiedMemoryManagerBuilder.DEFAULT_MAX_OPEN_MAPPED_FILES));
    }

    @Test
    void atMostMaxOpenFilesAreMappedAtOnce() throws IOException {
        Path file = write("limited.bin", randomBytes(4096));
        try (UnifiedMemoryManager limited = builder().maxOpenMappedFiles(2).timelineInterval(Duration.ZERO).build()) {
            UnifiedBuffer first = limited.mapFile(file, DataType.INT8, FileMapMode.READ_ONLY);
            UnifiedBuffer second = limited.mapFile(file, DataType.INT8, FileMapMode.READ_ONLY);
            assertThatThrownBy(() -> limited.mapFile(file, DataType.INT8, FileMapMode.READ_ONLY)).isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("compute.memory.mapped-files.max-open (2)");
            first.close();
            limited.mapFile(file, DataType.INT8, FileMapMode.READ_ONLY).close();
            second.close();
        }
        try (UnifiedMemoryManager off = builder().maxOpenMappedFiles(0).timelineInterval(Duration.ZERO).build()) {
            assertThatThrownBy(() -> off.mapFile(file, DataType.INT8, FileMapMode.READ_ONLY)).isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("mapping files is turned off");
        }
    }

    @Test
    void filesBeyondTwoGigabytesMap() throws IOException {
        Path file = dir.resolve("sparse.bin");
        long size = (3L << 30) + 16; // sparse: no disk blocks behind the zeros
        try (RandomAccessFile sparse = new RandomAccessFile(file.toFile(), "rw")) {
            sparse.setLength(size);
        }
        try (UnifiedBuffer mapped = manager.mapFile(file, DataType.INT64, FileMapMode.READ_WRITE)) {
            assertThat(mapped.byteSize()).isEqualTo(size);
            mapped.copyFrom(size - 8, new long[] {0x0123_4567_89AB_CDEFL}, 0, 1);
            long[] back = new long[2];
            mapped.copyTo(size - 16, back, 0, 2);
            assertThat(back).containsExactly(0L, 0x0123_4567_89AB_CDEFL);
        }
        try (FileChannel written = FileChannel.open(file)) {
            ByteBuffer last = ByteBuffer.allocate(8).order(ByteOrder.nativeOrder());
            written.read(last, size - 8);
            assertThat(last.getLong(0)).isEqualTo(0x0123_4567_89AB_CDEFL);
        }
    }

    protected Path write(String name, byte[] content) throws IOException {
        return Files.write(dir.resolve(name), content);
    }

    private byte[] randomBytes(int n) {
        byte[] bytes = new byte[n];
        random.nextBytes(bytes);
        return bytes;
    }
}
