package dev.compute.memory.manager;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.DataType;
import dev.compute.memory.FileMapMode;
import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.LiveBufferReport;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemorySnapshot;
import dev.compute.memory.MemoryStatistics;
import dev.compute.memory.MemoryTimeline;
import dev.compute.memory.lifetime.BufferCore;
import dev.compute.memory.lifetime.BufferHost.Transfer;
import dev.compute.memory.resource.Block;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A manager's figures, each read from the part that owns it (the chain's statistics, its pool or backend resource, the
 * chain's transfer and trim counts, the waiting queues, the mapped files, the leak detector's sites), and reading them
 * changes nothing.
 */
class ManagerFiguresTest {

    private static final long MiB = 1L << 20;
    private static final MemoryLocation DEVICE = MemoryLocation.DEVICE;

    private final ManagerParts parts = ManagerParts.on(new SimulatedDiscreteBackend())
            .settings(set -> set.maxPoolSize(64 * MiB).leakDetection(LeakDetectionLevel.PARANOID))
            .build();
    private final ManagerFigures figures = parts.figures;

    @TempDir
    Path dir;

    @AfterEach
    void close() {
        parts.close();
    }

    @Test
    void countsComeFromTheStatisticsAndHoldingsFromThePool() {
        Block large = parts.block(DEVICE, 4 * MiB);
        parts.chains.open(DEVICE).entry.deallocate(parts.block(DEVICE, 4000));

        MemoryStatistics figure = figures.statistics(DEVICE);

        LocationChain chain = parts.chains.known(DEVICE);
        assertThat(figure.location()).isEqualTo(DEVICE);
        assertThat(figure.allocatedBytes()).isEqualTo(large.size());
        assertThat(figure.requestedBytes()).isEqualTo(4 * MiB);
        assertThat(figure.requestedBytesPeak()).isEqualTo(4 * MiB + 4000);
        assertThat(figure.liveBuffers()).isEqualTo(1);
        assertThat(figure.allocations()).isEqualTo(2);
        assertThat(figure.frees()).isEqualTo(1);
        assertThat(figure.reservedBytes()).isEqualTo(chain.pool.reservedBytes()).isPositive();
        assertThat(figure.cachedBytes()).isEqualTo(figure.reservedBytes() - figure.allocatedBytes());
        assertThat(figure.largestFreeBlockBytes()).isPositive().isLessThanOrEqualTo(figure.cachedBytes());
        assertThat(figure.segments()).isEqualTo(chain.pool.segmentCount());
        assertThat(figure.poolMisses()).isEqualTo(chain.pool.poolMisses());
        assertThat(figure.backendAllocations()).isEqualTo(chain.backend.backendAllocations()).isPositive();
        assertThat(figure.backendFrees()).isZero();
    }

    @Test
    void transfersAndTrimsAreTheChainsAndWaitingRequestsTheQueues() {
        parts.services.count(Transfer.HOST_TO_DEVICE, DEVICE, 100);
        parts.services.count(Transfer.DEVICE_TO_HOST, DEVICE, 20);
        parts.services.count(Transfer.DEVICE_TO_DEVICE, DEVICE, 3);
        parts.services.count(Transfer.HOST_TO_DEVICE, MemoryLocation.HOST, 7);
        parts.chains.known(DEVICE).trim(0, parts.events);
        assertThat(figures.statistics(DEVICE).trims()).isEqualTo(1);
        List<Block> full = List.of(parts.block(DEVICE, 32 * MiB), parts.block(DEVICE, 32 * MiB));
        CompletableFuture<Block> waiting = parts.waiters.request(DataType.INT8, DEVICE, MiB, 64 * MiB, Duration.ofSeconds(30));

        MemoryStatistics figure = figures.statistics(DEVICE);

        assertThat(figure.bytesHostToDevice()).isEqualTo(100);
        assertThat(figure.bytesDeviceToHost()).isEqualTo(20);
        assertThat(figure.bytesDeviceToDevice()).isEqualTo(3);
        assertThat(figure.waitingRequests()).isEqualTo(1);
        assertThat(figure.waits()).isEqualTo(1);
        assertThat(figure.waitTimeouts()).isZero();
        assertThat(figures.statistics(MemoryLocation.HOST).bytesHostToDevice()).isEqualTo(7);
        waiting.cancel(true);
        full.forEach(block -> parts.returns.release(DEVICE, block, null, CompletableFuture.completedFuture(null), null));
    }

    @Test
    void withoutAPoolEveryAllocationIsAMissAndNothingIsCached() {
        try (ManagerParts unpooled = ManagerParts.on(new SimulatedDiscreteBackend()).settings(set -> set.poolingEnabled(false)).build()) {
            unpooled.block(DEVICE, MiB);
            unpooled.block(DEVICE, MiB);

            MemoryStatistics figure = unpooled.figures.statistics(DEVICE);

            assertThat(figure.poolHits()).isZero();
            assertThat(figure.poolMisses()).isEqualTo(2).isEqualTo(figure.backendAllocations());
            assertThat(figure.cachedBytes()).isZero();
            assertThat(figure.largestFreeBlockBytes()).isZero();
            assertThat(figure.oomRetries()).isZero();
        }
    }

    @Test
    void everyLocationInItsOrderAndNoneTheManagerLacks() {
        assertThat(figures.statistics().keySet()).containsExactlyElementsOf(parts.chains.locations());

        try (ManagerParts noPinned = ManagerParts.on(new SimulatedDiscreteBackend()).settings(set -> set.pinningEnabled(false)).build()) {
            assertThatThrownBy(() -> noPinned.figures.statistics(MemoryLocation.PINNED)).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("PINNED memory is not available on this manager");
            assertThat(noPinned.figures.statistics()).doesNotContainKey(MemoryLocation.PINNED);
        }
    }

    @Test
    void aSnapshotShowsTheSiteWhereATrackedBufferWasAllocated() {
        BufferCore buffer = parts.buffer(DEVICE, 4 * MiB);
        parts.leakDetector.track(buffer, buffer);

        MemorySnapshot snapshot = figures.snapshot(DEVICE);

        assertThat(snapshot.location()).isEqualTo(DEVICE);
        assertThat(snapshot.segments()).flatExtracting(MemorySnapshot.Segment::blocks)
                .filteredOn(block -> block.state() == MemorySnapshot.BlockState.LIVE).singleElement()
                .satisfies(block -> assertThat(block.allocationSite()).contains("aSnapshotShowsTheSiteWhereATrackedBufferWasAllocated"));
        assertThat(figures.liveBuffers()).singleElement().satisfies(report -> {
            assertThat(report.location()).isEqualTo(DEVICE);
            assertThat(report.sizeBytes()).isEqualTo(4 * MiB);
            assertThat(report.allocationSite()).contains("aSnapshotShowsTheSiteWhereATrackedBufferWasAllocated");
            assertThat(report.mappedFile()).isNull();
        });
        buffer.close();
    }

    @Test
    void liveBuffersListTheMappedFilesTooAndTheReservedBytesAddUp() throws Exception {
        Path file = Files.write(dir.resolve("table.bin"), new byte[4096]);
        parts.mappedFiles.map(file, DataType.INT8, FileMapMode.READ_ONLY, 0, null, "mapped at the test");
        parts.block(MemoryLocation.HOST, MiB);

        assertThat(figures.liveBuffers()).containsExactlyInAnyOrder(new LiveBufferReport(MemoryLocation.HOST, MiB, null),
                new LiveBufferReport(MemoryLocation.HOST, 4096, "mapped at the test", file));
        long reserved = 0;
        for (MemoryStatistics figure : figures.statistics().values()) {
            reserved += figure.reservedBytes();
        }
        assertThat(figures.reservedBytes()).isEqualTo(reserved).isPositive();
    }

    @Test
    void aTimelineSampleIsEachLocationsFiguresAtOneMoment() {
        parts.block(DEVICE, 4 * MiB);

        figures.sampleTimeline();
        figures.sampleTimeline();

        for (MemoryLocation location : parts.chains.locations()) {
            MemoryStatistics figure = figures.statistics(location);
            assertThat(figures.timeline(location)).hasSize(2).allSatisfy(sample -> {
                assertThat(sample.reservedBytes()).isEqualTo(figure.reservedBytes());
                assertThat(sample.allocatedBytes()).isEqualTo(figure.allocatedBytes());
                assertThat(sample.cachedBytes()).isEqualTo(figure.cachedBytes());
            });
        }
        List<MemoryTimeline.Sample> device = figures.timeline(DEVICE);
        assertThat(device.get(1).epochMillis()).isGreaterThanOrEqualTo(device.get(0).epochMillis());
        assertThat(device.getFirst().allocatedBytes()).isEqualTo(4 * MiB);
    }

    @Test
    void readingTheFiguresChangesNothingInThePool() {
        LocationChain chain = parts.chains.open(DEVICE);
        chain.entry.deallocate(parts.block(DEVICE, 4096)); // cached on the fast path
        long hits = chain.pool.poolHits();

        MemoryStatistics first = figures.statistics(DEVICE);
        figures.snapshot(DEVICE);
        figures.liveBuffers();
        MemoryStatistics second = figures.statistics(DEVICE);

        assertThat(second).isEqualTo(first);
        parts.block(DEVICE, 4096);
        assertThat(chain.pool.poolHits()).as("the cached block was not flushed by the reading").isEqualTo(hits + 1);
    }
}
