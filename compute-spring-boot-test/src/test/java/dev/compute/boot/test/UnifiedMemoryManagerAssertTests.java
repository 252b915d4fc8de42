package dev.compute.boot.test;

import static dev.compute.boot.test.ComputeMemoryAssertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.DataType;
import dev.compute.memory.FileMapMode;
import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemoryStatistics;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class UnifiedMemoryManagerAssertTests {

    private final UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend("cpu")
            .leakDetection(LeakDetectionLevel.PARANOID).timelineInterval(Duration.ZERO).build();

    @AfterEach
    void close() {
        manager.close();
    }

    @Test
    void openBuffersAndFiguresAsTheManagerHasThem() {
        assertThat(manager).hasNoOpenBuffers().hasAllocatedBytes(MemoryLocation.HOST, 0).hasNoLeaksDetected();
        try (UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 1000)) {
            buffer.copyFrom(new float[1000]);
            assertThat(manager).hasOpenBuffers(1).hasRequestedBytes(MemoryLocation.HOST, 4000).hasAllocatedBytes(MemoryLocation.HOST, 4096)
                    .statistics(MemoryLocation.HOST).extracting(MemoryStatistics::liveBuffers).isEqualTo(1L);
        }
        assertThat(manager).hasNoOpenBuffers();
    }

    @Test
    void aFailureAboutOpenBuffersSaysWhereTheyWereAllocated() {
        try (UnifiedBuffer buffer = manager.allocate(4096)) {
            assertThatThrownBy(() -> assertThat(manager).hasNoOpenBuffers()).isInstanceOf(AssertionError.class)
                    .hasMessageStartingWith("Expected 0 open buffer(s) but the manager has 1\n1 buffer(s), 4096 bytes at HOST, allocated at:\n"
                            + "\tat dev.compute.boot.test.UnifiedMemoryManagerAssertTests.aFailureAboutOpenBuffersSaysWhereTheyWereAllocated(");
            assertThatThrownBy(() -> assertThat(manager).hasAllocatedBytes(MemoryLocation.HOST, 0)).isInstanceOf(AssertionError.class)
                    .hasMessageStartingWith("Expected 0 allocated bytes at HOST but there are 4096\n1 buffer(s), 4096 bytes at HOST");
        }
    }

    /**
     * A failure about one location's bytes listed the buffers of every location and the mapped files (which no
     * location's figures count) as if they were what it counted.
     */
    @Test
    void aFailureAboutALocationsBytesListsTheBuffersItCountsAlone(@TempDir Path directory) throws IOException {
        Path file = Files.write(directory.resolve("floats"), new byte[8192]);
        try (UnifiedBuffer pinned = manager.allocate(1024, MemoryLocation.PINNED); UnifiedBuffer host = manager.allocate(2048, MemoryLocation.HOST);
                UnifiedBuffer mapped = manager.mapFile(file, DataType.FLOAT32, FileMapMode.READ_ONLY)) {
            assertThatThrownBy(() -> assertThat(manager).hasAllocatedBytes(MemoryLocation.HOST, 0)).isInstanceOf(AssertionError.class)
                    .hasMessageStartingWith("Expected 0 allocated bytes at HOST but there are 2048\n1 buffer(s), 2048 bytes at HOST, allocated at:\n")
                    .hasMessageNotContaining("1024 bytes").hasMessageNotContaining("8192 bytes");
            assertThatThrownBy(() -> assertThat(manager).hasRequestedBytes(MemoryLocation.PINNED, 0)).isInstanceOf(AssertionError.class)
                    .hasMessageStartingWith("Expected 0 requested bytes at PINNED but there are 1024\n1 buffer(s), 1024 bytes at PINNED, allocated at:\n")
                    .hasMessageNotContaining("2048 bytes").hasMessageNotContaining("8192 bytes");
        }
    }

    @Test
    void belowParanoidAFailureAboutOpenBuffersSaysWhichSettingRecordsTheirSitesForATestsManager() {
        try (UnifiedMemoryManager simple = UnifiedMemoryManager.builder().backend("cpu").leakDetection(LeakDetectionLevel.SIMPLE)
                .timelineInterval(Duration.ZERO).build(); UnifiedBuffer buffer = simple.allocate(4096)) {
            // a test's manager reads spring.test.compute.* alone: compute.memory.leak-detection would not change it
            assertThatThrownBy(() -> assertThat(simple).hasNoOpenBuffers()).isInstanceOf(AssertionError.class)
                    .hasMessageContaining("spring.test.compute.memory.leak-detection=paranoid");
        }
    }

    /** A check of a location the manager lacks is a test failure that says so, not the manager's own exception. */
    @Test
    void aLocationTheManagerDoesNotHaveFailsTheAssertionSayingSo() {
        try (UnifiedMemoryManager unpinned = UnifiedMemoryManager.builder().backend("cpu").pinningEnabled(false).timelineInterval(Duration.ZERO).build()) {
            String lacks = "the manager has no PINNED memory; its locations: " + unpinned.locations();
            assertThatThrownBy(() -> assertThat(unpinned).hasAllocatedBytes(MemoryLocation.PINNED, 0)).isInstanceOf(AssertionError.class)
                    .hasMessage("Expected 0 allocated bytes at PINNED but " + lacks);
            assertThatThrownBy(() -> assertThat(unpinned).hasRequestedBytes(MemoryLocation.PINNED, 0)).isInstanceOf(AssertionError.class)
                    .hasMessage("Expected 0 requested bytes at PINNED but " + lacks);
            assertThatThrownBy(() -> assertThat(unpinned).statistics(MemoryLocation.PINNED)).isInstanceOf(AssertionError.class)
                    .hasMessage("Expected the statistics of PINNED but " + lacks);
        }
    }

    /** A null where a location or a manager's supplier belongs is the caller's mistake, said so, not a NullPointerException from inside. */
    @Test
    void aNullLocationOrSupplierIsRefusedSayingWhatBelongsThere() {
        String location = "a location to check is needed, not null: one of the manager's " + manager.locations();
        assertThatThrownBy(() -> assertThat(manager).hasAllocatedBytes(null, 0)).isInstanceOf(IllegalArgumentException.class).hasMessage(location);
        assertThatThrownBy(() -> assertThat(manager).hasRequestedBytes(null, 0)).isInstanceOf(IllegalArgumentException.class).hasMessage(location);
        assertThatThrownBy(() -> assertThat(manager).statistics(null)).isInstanceOf(IllegalArgumentException.class).hasMessage(location);
        assertThatThrownBy(() -> ComputeMemoryExtension.watching(null)).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("ComputeMemoryExtension.watching needs a supplier of the manager to watch, not null: watching(() -> manager)");
    }

    @Test
    void aFailureAboutLeaksCountsThem() throws InterruptedException {
        manager.allocate(4096);
        // a collection and the Cleaner's thread, neither bound in time on a loaded machine
        for (long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos(); manager.leaksDetected() == 0 && System.nanoTime() < deadline; ) {
            System.gc();
            Thread.sleep(10);
        }
        assertThatThrownBy(() -> assertThat(manager).hasNoLeaksDetected()).isInstanceOf(AssertionError.class)
                .hasMessageStartingWith("Expected no leaks but the manager found 1 buffer(s) garbage-collected without close()");
    }
}
