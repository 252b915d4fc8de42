package dev.compute.boot.actuate.endpoint;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.boot.actuate.RecentMemoryStatistics;
import dev.compute.memory.DataType;
import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemorySnapshot.BlockState;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

class ComputeMemoryEndpointTests {

    private final SimulatedDiscreteBackend backend = new SimulatedDiscreteBackend(64L << 20);
    private final UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(backend).releaseThreshold(0)
            .pinningEnabled(false).build();
    private final ComputeMemoryEndpoint endpoint = new ComputeMemoryEndpoint(manager, new RecentMemoryStatistics(manager));

    @AfterEach
    void close() {
        manager.close();
    }

    @Test
    void summaryGivesBackendDeviceAndTheFiguresOfEveryLocation() {
        try (UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 1000, MemoryLocation.DEVICE)) {
            buffer.copyFrom(new float[1000]);
            ComputeMemoryEndpoint.ComputeMemoryDescriptor summary = endpoint.summary();
            assertThat(summary.backend()).isEqualTo("simulated");
            assertThat(summary.device().name()).isEqualTo("simulated discrete device");
            assertThat(summary.device().totalBytes()).isEqualTo(64L << 20);
            assertThat(summary.defaultLocation()).isEqualTo(MemoryLocation.DEVICE);
            assertThat(summary.locations()).containsOnlyKeys(manager.locations()).doesNotContainKey(MemoryLocation.PINNED);
            ComputeMemoryEndpoint.LocationSummary device = summary.locations().get(MemoryLocation.DEVICE);
            assertThat(device.liveBuffers()).isEqualTo(1);
            assertThat(device.requestedBytes()).isEqualTo(4000);
            assertThat(device.allocatedBytes()).isGreaterThanOrEqualTo(4000);
            assertThat(device.reservedBytes()).isGreaterThanOrEqualTo(device.allocatedBytes());
            assertThat(device.cachedBytes()).isEqualTo(device.reservedBytes() - device.allocatedBytes());
            assertThat(device.overhead()).isEqualTo((double) device.reservedBytes() / device.allocatedBytes());
            assertThat(device.counts().allocations()).isEqualTo(1);
            assertThat(device.counts().poolMisses()).isEqualTo(1);
            assertThat(device.copiedBytes().hostToDevice()).isEqualTo(4000);
            assertThat(summary.definitions()).containsKeys("fragmentation", "overhead", "hitRate");
        }
    }

    @Test
    void aLocationShowsItsSegmentsWithTheBufferLiveThenFreeAfterClose() {
        UnifiedBuffer buffer = manager.allocate(1 << 16, MemoryLocation.HOST);
        ComputeMemoryEndpoint.LocationDescriptor live = endpoint.location(MemoryLocation.HOST);
        assertThat(live).isNotNull();
        assertThat(live.segments()).isNotEmpty();
        assertThat(live.segments()).flatExtracting(ComputeMemoryEndpoint.SegmentDescriptor::blocks)
                .filteredOn(block -> block.state() == BlockState.LIVE).singleElement()
                .satisfies(block -> assertThat(block.requestedBytes()).isEqualTo(1 << 16));
        for (ComputeMemoryEndpoint.SegmentDescriptor segment : live.segments()) {
            assertThat(segment.blocks().stream().mapToLong(ComputeMemoryEndpoint.BlockDescriptor::sizeBytes).sum())
                    .as("blocks tile their segment").isEqualTo(segment.sizeBytes());
        }
        buffer.close();
        ComputeMemoryEndpoint.LocationDescriptor after = endpoint.location(MemoryLocation.HOST);
        assertThat(after.segments()).flatExtracting(ComputeMemoryEndpoint.SegmentDescriptor::blocks)
                .noneMatch(block -> block.state() == BlockState.LIVE);
        assertThat(after.summary().cachedBytes()).isPositive();
        assertThat(after.timeline()).isNotEmpty();
    }

    @Test
    void aLocationTheManagerDoesNotHaveIsNotFound() {
        assertThat(endpoint.location(MemoryLocation.PINNED)).isNull();
    }

    @Test
    void trimGivesCachedSegmentsBack() {
        manager.allocate(1 << 20, MemoryLocation.DEVICE).close();
        assertThat(manager.statistics(MemoryLocation.DEVICE).reservedBytes()).isPositive();

        ComputeMemoryEndpoint.TrimDescriptor trimmed = endpoint.trim(null);

        assertThat(trimmed.released()).isEqualTo("beyond-release-threshold");
        assertThat(trimmed.releasedBytes()).isPositive();
        assertThat(trimmed.reservedBytesAfter()).containsEntry(MemoryLocation.DEVICE, 0L);
        assertThat(manager.statistics(MemoryLocation.DEVICE).trims()).isEqualTo(1);
        assertThat(endpoint.trim(true).released()).isEqualTo("all");
    }

    @Test
    void leaksAreCountedAndOpenBuffersGroupedBySiteMostBytesFirst() throws InterruptedException {
        try (UnifiedMemoryManager paranoid = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend(64L << 20))
                .leakDetection(LeakDetectionLevel.PARANOID).pinningEnabled(false).build()) {
            ComputeMemoryEndpoint leakEndpoint = new ComputeMemoryEndpoint(paranoid, new RecentMemoryStatistics(paranoid));
            List<UnifiedBuffer> held = new ArrayList<>();
            for (int i = 0; i < 3; i++) {
                held.add(allocateInALoop(paranoid));
            }
            held.add(allocateOnce(paranoid));
            ComputeMemoryEndpoint.LeakDescriptor open = leakEndpoint.summary().leaks();
            assertThat(open.detected()).isZero();
            assertThat(open.openBuffers()).hasSize(2);
            assertThat(open.openBuffers().getFirst()).satisfies(site -> {
                assertThat(site.location()).isEqualTo(MemoryLocation.DEVICE);
                assertThat(site.buffers()).isEqualTo(3);
                assertThat(site.requestedBytes()).isEqualTo(3 * 4096);
                assertThat(site.allocationSite()).contains("allocateInALoop");
            });
            assertThat(open.openBuffers().get(1).allocationSite()).contains("allocateOnce");

            dropUnclosed(paranoid);
            for (int i = 0; i < 200 && paranoid.leaksDetected() == 0; i++) {
                System.gc();
                Thread.sleep(10);
            }
            assertThat(leakEndpoint.summary().leaks().detected()).isEqualTo(1);
            assertThat(leakEndpoint.summary().leaks().openBuffers()).noneMatch(site -> site.allocationSite().contains("dropUnclosed"));
            held.forEach(UnifiedBuffer::close);
            assertThat(leakEndpoint.summary().leaks().openBuffers()).isEmpty();
        }
    }

    @Test
    void withoutAllocationSitesTheLeakSummaryListsNoSites() {
        try (UnifiedBuffer buffer = manager.allocate(4096, MemoryLocation.DEVICE)) {
            assertThat(endpoint.summary().leaks().openBuffers()).as("simple leak detection records no sites").isEmpty();
        }
    }

    private static UnifiedBuffer allocateInALoop(UnifiedMemoryManager manager) {
        return manager.allocate(4096, MemoryLocation.DEVICE);
    }

    private static UnifiedBuffer allocateOnce(UnifiedMemoryManager manager) {
        return manager.allocate(1024, MemoryLocation.DEVICE);
    }

    @SuppressWarnings("resource")
    private static void dropUnclosed(UnifiedMemoryManager manager) {
        manager.allocate(512, MemoryLocation.DEVICE);
    }
}
