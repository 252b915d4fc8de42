package dev.compute.memory.manager;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.DataType;
import dev.compute.memory.FileMapMode;
import dev.compute.memory.MappedFileStatistics;
import java.io.IOException;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The mappings of one manager: the limit on how many are open, their figures, and when each is unmapped. */
class MappedFilesTest {

    @TempDir
    Path dir;

    private Path file(int bytes) throws IOException {
        return Files.write(Files.createTempFile(dir, "mapped", ".bin"), new byte[bytes]);
    }

    @Test
    void theLimitCountsOpenMappingsAndAFreedSlotIsReused() throws IOException {
        MappedFiles files = new MappedFiles(1);
        Path file = file(4096);
        MappedFile first = files.map(file, DataType.INT8, FileMapMode.READ_ONLY, 0, null, null);
        assertThatThrownBy(() -> files.map(file, DataType.INT8, FileMapMode.READ_ONLY, 0, null, null))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("1 files are mapped, the most compute.memory.mapped-files.max-open (1) allows");
        files.release(first, CompletableFuture.completedFuture(null));
        files.release(files.map(file, DataType.INT8, FileMapMode.READ_ONLY, 0, null, null), CompletableFuture.completedFuture(null));
        assertThat(files.statistics()).isEqualTo(new MappedFileStatistics(0, 0, 4096, 2, 1));
    }

    @Test
    void aMappingThatFailsGivesItsSlotBack() throws IOException {
        MappedFiles files = new MappedFiles(1);
        Path file = file(10);
        assertThatThrownBy(() -> files.map(file, DataType.INT32, FileMapMode.READ_ONLY, 0, null, null))
                .isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> files.map(dir.resolve("absent"), DataType.INT8, FileMapMode.READ_ONLY, 0, null, null))
                .isInstanceOf(IOException.class);
        MappedFile mapped = files.map(file, DataType.INT8, FileMapMode.READ_ONLY, 0, null, null);
        assertThat(files.statistics()).isEqualTo(new MappedFileStatistics(1, 10, 10, 1, 1));
        files.unmapAll();
        assertThat(mapped.unmap()).as("unmapped already").isFalse();
    }

    @Test
    void figuresFollowMappingsAndThePeakStays() throws IOException {
        MappedFiles files = new MappedFiles(8);
        MappedFile a = files.map(file(8192), DataType.INT8, FileMapMode.READ_ONLY, 0, null, null);
        MappedFile b = files.map(file(8192), DataType.INT64, FileMapMode.READ_WRITE, 4096, 4096L, "site");
        assertThat(files.statistics()).isEqualTo(new MappedFileStatistics(2, 12_288, 12_288, 2, 8));
        assertThat(files.open()).containsExactlyInAnyOrder(a, b);
        assertThat(b.allocationSite()).isEqualTo("site");
        files.release(a, CompletableFuture.completedFuture(null));
        assertThat(files.statistics()).isEqualTo(new MappedFileStatistics(1, 4096, 12_288, 2, 8));
        assertThat(files.open()).containsExactly(b);
        files.unmapAll();
        files.unmapAll();
        assertThat(files.statistics()).isEqualTo(new MappedFileStatistics(0, 0, 12_288, 2, 8));
    }

    @Test
    void aMappingGivenBackUnderDeviceWorkIsUnmappedWhenTheWorkCompletes() throws IOException {
        MappedFiles files = new MappedFiles(8);
        MappedFile mapped = files.map(Files.write(dir.resolve("busy.bin"), new byte[] {7, 8}), DataType.INT8, FileMapMode.READ_ONLY,
                0, null, null);
        CompletableFuture<Void> kernel = new CompletableFuture<>();
        files.release(mapped, kernel);
        assertThat(files.statistics().openMappings()).isEqualTo(1);
        assertThat(mapped.segment().hostSegment().get(ValueLayout.JAVA_BYTE, 1)).as("still mapped for the work").isEqualTo((byte) 8);
        kernel.complete(null);
        assertThat(files.statistics().openMappings()).isZero();
        assertThatThrownBy(() -> mapped.segment().hostSegment().get(ValueLayout.JAVA_BYTE, 1)).as("its arena is closed")
                .isInstanceOf(IllegalStateException.class);
    }

    @Test
    void zeroTurnsMappingOff() throws IOException {
        MappedFiles off = new MappedFiles(0);
        Path file = file(16);
        assertThatThrownBy(() -> off.map(file, DataType.INT8, FileMapMode.READ_ONLY, 0, null, null))
                .isInstanceOf(IllegalStateException.class).hasMessageContaining("mapping files is turned off").hasMessageContaining(file.toString());
    }
}
