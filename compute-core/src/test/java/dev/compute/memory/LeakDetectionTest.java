package dev.compute.memory;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** A buffer dropped without close() is found, reported with where it was allocated, and its memory returns. */
class LeakDetectionTest {

    private static UnifiedMemoryManager manager(LeakDetectionLevel level) {
        return UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend()).leakDetection(level)
                .timelineInterval(Duration.ZERO).build();
    }

    @SuppressWarnings("resource")
    private static void leak(UnifiedMemoryManager manager) {
        manager.allocate(4096, MemoryLocation.DEVICE).copyFrom(new byte[] {1});
    }

    @SuppressWarnings("resource")
    private static void leakMapping(UnifiedMemoryManager manager, Path file) throws IOException {
        manager.mapFile(file, DataType.INT8, FileMapMode.READ_ONLY).copyTo(new byte[1]);
    }

    /** Until the leaked buffer's memory is back and counted as a leak: the detector counts it after it gives the memory back. */
    private static void awaitCollected(UnifiedMemoryManager manager, long expectedLive) throws InterruptedException {
        for (int i = 0; i < 100 && (manager.statistics(MemoryLocation.DEVICE).liveBuffers() != expectedLive || manager.leaksDetected() == 0); i++) {
            System.gc();
            Thread.sleep(20);
        }
    }

    @Test
    void paranoidReportsTheSiteAndGivesTheMemoryBack() throws InterruptedException {
        try (UnifiedMemoryManager manager = manager(LeakDetectionLevel.PARANOID)) {
            leak(manager);
            List<LiveBufferReport> live = manager.liveBuffers();
            assertThat(live).singleElement().satisfies(r -> {
                assertThat(r.sizeBytes()).isEqualTo(4096);
                assertThat(r.allocationSite()).contains("LeakDetectionTest.leak");
            });
            awaitCollected(manager, 0);
            assertThat(manager.statistics(MemoryLocation.DEVICE).liveBuffers()).isZero();
            assertThat(manager.leaksDetected()).isEqualTo(1);
        }
    }

    @Test
    void disabledTracksNothingAndClosedBuffersAreNotLeaks() throws InterruptedException {
        try (UnifiedMemoryManager manager = manager(LeakDetectionLevel.DISABLED)) {
            leak(manager);
            assertThat(manager.liveBuffers()).singleElement().satisfies(r -> assertThat(r.allocationSite()).isNull());
            System.gc();
            Thread.sleep(50);
            assertThat(manager.statistics(MemoryLocation.DEVICE).liveBuffers()).as("untracked: lost until close").isEqualTo(1);
        }
        try (UnifiedMemoryManager manager = manager(LeakDetectionLevel.PARANOID)) {
            manager.allocate(64, MemoryLocation.DEVICE).close();
            System.gc();
            Thread.sleep(50);
            assertThat(manager.leaksDetected()).isZero();
        }
    }

    @Test
    void simpleSamplesAboutOneBufferInTheInterval() throws InterruptedException {
        try (UnifiedMemoryManager manager = manager(LeakDetectionLevel.SIMPLE)) {
            int n = LeakDetectionLevel.SIMPLE_SAMPLING_INTERVAL * 40;
            for (int i = 0; i < n; i++) {
                leak(manager);
            }
            long before = manager.statistics(MemoryLocation.DEVICE).liveBuffers();
            for (int i = 0; i < 20; i++) {
                System.gc();
                Thread.sleep(20);
            }
            long found = manager.leaksDetected();
            assertThat(found).isBetween(10L, 100L);
            assertThat(manager.statistics(MemoryLocation.DEVICE).liveBuffers()).isEqualTo(before - found);
        }
    }

    @Test
    void everyLeakedMappingIsFoundAtSimpleAndUnmapped(@TempDir Path dir) throws Exception {
        Path file = Files.write(dir.resolve("leaked.bin"), new byte[4096]);
        try (UnifiedMemoryManager manager = manager(LeakDetectionLevel.SIMPLE)) {
            for (int i = 0; i < 3; i++) {
                leakMapping(manager, file);
            }
            assertThat(manager.mappedFileStatistics().openMappings()).isEqualTo(3);
            for (int i = 0; i < 100 && manager.mappedFileStatistics().openMappings() > 0; i++) {
                System.gc();
                Thread.sleep(20);
            }
            assertThat(manager.mappedFileStatistics().openMappings()).as("not a sample: every mapping is tracked").isZero();
            assertThat(manager.leaksDetected()).isEqualTo(3);
        }
    }
}
