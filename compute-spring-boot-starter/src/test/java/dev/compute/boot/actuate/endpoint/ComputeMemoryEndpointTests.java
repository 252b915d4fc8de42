package dev.compute.boot.actuate.endpoint;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.boot.ComputeBudgets;
import dev.compute.boot.ComputeMemoryAutoConfiguration;
import dev.compute.boot.actuate.ObservedManagers;
import dev.compute.memory.DataType;
import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.MemoryBudget;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemorySnapshot.BlockState;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.springframework.boot.actuate.endpoint.InvalidEndpointRequestException;

class ComputeMemoryEndpointTests {

    private final SimulatedDiscreteBackend backend = new SimulatedDiscreteBackend(64L << 20);
    private final UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(backend).releaseThreshold(0)
            .pinningEnabled(false).build();
    private final ComputeMemoryEndpoint endpoint = endpointOf(Map.of("unifiedMemoryManager", manager), manager);

    @AfterEach
    void close() {
        manager.close();
    }

    private static ComputeMemoryEndpoint endpointOf(Map<String, UnifiedMemoryManager> beans, UnifiedMemoryManager primary) {
        return new ComputeMemoryEndpoint(new ObservedManagers(beans, primary));
    }

    @Test
    void summaryGivesBackendDeviceAndTheFiguresOfEveryLocation() {
        try (UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 1000, MemoryLocation.DEVICE)) {
            buffer.copyFrom(new float[1000]);
            ComputeMemoryEndpoint.ComputeMemoryDescriptor summary = endpoint.summary();
            assertThat(summary.managers()).containsOnlyKeys("default");
            assertThat(summary.primary()).isEqualTo("default");
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
    void aManagerSaysWhetherItIsClosed() {
        assertThat(endpoint.manager("default")).isInstanceOfSatisfying(ComputeMemoryEndpoint.ManagerDescriptor.class,
                open -> assertThat(open.closed()).isFalse());
        manager.close();
        assertThat(endpoint.manager("default")).isInstanceOfSatisfying(ComputeMemoryEndpoint.ManagerDescriptor.class,
                closed -> assertThat(closed.closed()).as("its figures are the last it had").isTrue());
    }

    @Test
    void aLocationShowsItsSegmentsWithTheBufferLiveThenFreeAfterClose() {
        UnifiedBuffer buffer = manager.allocate(1 << 16, MemoryLocation.HOST);
        ComputeMemoryEndpoint.LocationDescriptor live = endpoint.location("default", MemoryLocation.HOST);
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
        ComputeMemoryEndpoint.LocationDescriptor after = endpoint.location("default", MemoryLocation.HOST);
        assertThat(after.segments()).flatExtracting(ComputeMemoryEndpoint.SegmentDescriptor::blocks)
                .noneMatch(block -> block.state() == BlockState.LIVE);
        assertThat(after.summary().cachedBytes()).isPositive();
        assertThat(after.timeline()).isNotEmpty();
    }

    @Test
    void aLocationTheManagerDoesNotHaveIsNotFound() {
        assertThat(endpoint.location("default", MemoryLocation.PINNED)).isNull();
        assertThat(endpoint.location("elsewhere", MemoryLocation.HOST)).as("no manager of that name").isNull();
        // what is not there is not found, before the parameters of an answer it will not give are checked
        assertThat(endpoint.location("default", MemoryLocation.PINNED, -1)).isNull();
        assertThat(endpoint.location("elsewhere", MemoryLocation.HOST, -1)).isNull();
        assertThat(endpoint.manager("pinned", -1)).as("a location the primary does not have").isNull();
        assertThat(endpoint.manager("nowhere", -1)).isNull();
    }

    @Test
    void aNameSelectsAManagerOrElseALocationOfThePrimaryAsBeforeThereWereSeveral() {
        manager.allocate(4096, MemoryLocation.HOST).close();
        assertThat(endpoint.manager("default")).isInstanceOfSatisfying(ComputeMemoryEndpoint.ManagerDescriptor.class, selected -> {
            assertThat(selected.name()).isEqualTo("default");
            assertThat(selected.primary()).isTrue();
            assertThat(selected.settings().backend()).isEqualTo("simulated");
            assertThat(selected.settings().releaseThresholdBytes()).as("set to 0 above").isZero();
            assertThat(selected.settings().trimInterval()).isEqualTo("PT5M");
            assertThat(selected.settings().compactionInterval()).isEqualTo("PT0S");
            assertThat(selected.settings().compactOnOutOfMemory()).isTrue();
            assertThat(selected.locations()).containsOnlyKeys(manager.locations());
        });
        assertThat(endpoint.manager("host")).isInstanceOfSatisfying(ComputeMemoryEndpoint.LocationDescriptor.class, selected -> {
            assertThat(selected.manager()).isEqualTo("default");
            assertThat(selected.location()).isEqualTo(MemoryLocation.HOST);
            assertThat(selected.segments()).isNotEmpty();
        });
        assertThat(endpoint.manager("pinned")).as("a location the primary does not have").isNull();
        assertThat(endpoint.manager("nowhere")).isNull();
        assertThat(endpoint.manager("ho\u017Ft")).as("a name that only Unicode case folding makes 'host'").isNull();
    }

    @Test
    void aConfiguredBudgetIsMarkedSoAndTheBudgetsUnderItAreShownUnderIt() {
        ComputeBudgets budgets = new ComputeBudgets();
        ComputeMemoryEndpoint described = new ComputeMemoryEndpoint(new ObservedManagers(Map.of("unifiedMemoryManager", manager), manager), budgets);
        try (MemoryBudget tenant = manager.budget("tenant-a", 1 << 20); MemoryBudget request = tenant.child("request-1", 1 << 19);
             UnifiedBuffer held = request.allocate(4096, MemoryLocation.HOST)) {
            budgets.add("default", tenant, 1 << 19);
            assertThat(described.manager("default")).isInstanceOfSatisfying(ComputeMemoryEndpoint.ManagerDescriptor.class,
                    selected -> assertThat(selected.budgets()).singleElement().satisfies(budget -> {
                        assertThat(budget.configured()).isTrue();
                        assertThat(budget.allocatedBytes()).as("the request's bytes count in it").isEqualTo(4096);
                        assertThat(budget.budgetsUnder()).isEqualTo(1);
                        assertThat(budget.budgets()).singleElement().satisfies(under -> {
                            assertThat(under.name()).isEqualTo("tenant-a/request-1");
                            assertThat(under.configured()).isFalse();
                            assertThat(under.limitBytes()).isEqualTo(1 << 19);
                            assertThat(under.liveBuffers()).isEqualTo(1);
                        });
                    }));
        }
    }

    @Test
    void aManagersOpenBudgetsAreShownWithTheirFigures() {
        try (MemoryBudget tenant = manager.budget("tenant-a", 1 << 20); UnifiedBuffer held = tenant.allocate(4096, MemoryLocation.HOST)) {
            assertThat(endpoint.manager("default")).isInstanceOfSatisfying(ComputeMemoryEndpoint.ManagerDescriptor.class,
                    selected -> assertThat(selected.budgets()).singleElement().satisfies(budget -> {
                        assertThat(budget.name()).isEqualTo("tenant-a");
                        assertThat(budget.limitBytes()).isEqualTo(1 << 20);
                        assertThat(budget.allocatedBytes()).isEqualTo(held.byteSize());
                        assertThat(budget.liveBuffers()).isEqualTo(1);
                    }));
        }
        assertThat(endpoint.manager("default")).isInstanceOfSatisfying(ComputeMemoryEndpoint.ManagerDescriptor.class,
                selected -> assertThat(selected.budgets()).as("a closed budget is gone").isEmpty());
    }

    @Test
    void severalManagersAreListedEachSelectedByItsNameAndTrimmedTogetherOrAlone() {
        try (UnifiedMemoryManager other = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend(64L << 20))
                .releaseThreshold(0).pinningEnabled(false).build()) {
            Map<String, UnifiedMemoryManager> beans = new LinkedHashMap<>();
            beans.put("gpuUnifiedMemoryManager", manager);
            beans.put("otherUnifiedMemoryManager", other);
            manager.allocate(1 << 20, MemoryLocation.DEVICE).close();
            other.allocate(1 << 20, MemoryLocation.DEVICE).close();
            ComputeMemoryEndpoint both = endpointOf(beans, other);
            ComputeMemoryEndpoint.ComputeMemoryDescriptor summary = both.summary();
            assertThat(summary.managers()).containsOnlyKeys("gpu", "other");
            assertThat(summary.managers().get("other").primary()).isTrue();
            assertThat(summary.primary()).isEqualTo("other");
            assertThat(both.location("gpu", MemoryLocation.DEVICE).summary().reservedBytes()).isPositive();

            ComputeMemoryEndpoint.TrimDescriptor one = (ComputeMemoryEndpoint.TrimDescriptor) both.trim(null, null, "gpu");
            assertThat(one.managers()).containsOnlyKeys("gpu");
            assertThat(one.managers().get("gpu").reservedBytesAfter()).containsEntry(MemoryLocation.DEVICE, 0L);
            assertThat(other.statistics(MemoryLocation.DEVICE).reservedBytes()).as("the other manager kept its cache").isPositive();

            ComputeMemoryEndpoint.TrimDescriptor all = (ComputeMemoryEndpoint.TrimDescriptor) both.trim(true, null, null);
            assertThat(all.released()).isEqualTo("all");
            assertThat(all.managers()).containsOnlyKeys("gpu", "other");
            assertThat(other.statistics(MemoryLocation.DEVICE).reservedBytes()).isZero();

            assertThatThrownBy(() -> both.trim(null, null, "tpu")).isInstanceOf(InvalidEndpointRequestException.class)
                    .hasMessageContaining("'tpu'");
        }
    }

    @Test
    void withSeveralManagersAndNoPrimaryTheListHasNoPrimarySummary() {
        try (UnifiedMemoryManager other = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend(64L << 20)).build()) {
            ComputeMemoryEndpoint.ComputeMemoryDescriptor summary = endpointOf(Map.of("a", manager, "b", other), null).summary();
            assertThat(summary.managers()).containsOnlyKeys("a", "b");
            assertThat(summary.primary()).isNull();
            assertThat(summary.locations()).isNull();
            assertThat(endpointOf(Map.of("a", manager, "b", other), null).manager("host")).isNull();
        }
    }

    @Test
    void trimGivesCachedSegmentsBack() {
        manager.allocate(1 << 20, MemoryLocation.DEVICE).close();
        assertThat(manager.statistics(MemoryLocation.DEVICE).reservedBytes()).isPositive();

        ComputeMemoryEndpoint.TrimDescriptor trimmed = (ComputeMemoryEndpoint.TrimDescriptor) endpoint.trim(null, null, null);

        assertThat(trimmed.released()).isEqualTo("beyond-release-threshold");
        assertThat(trimmed.releasedBytes()).isPositive();
        assertThat(trimmed.managers().get("default").reservedBytesAfter()).containsEntry(MemoryLocation.DEVICE, 0L);
        assertThat(manager.statistics(MemoryLocation.DEVICE).trims()).isEqualTo(1);
        assertThat(((ComputeMemoryEndpoint.TrimDescriptor) endpoint.trim(true, null, null)).released()).isEqualTo("all");
    }

    @Test
    void compactionMovesWhatNothingHoldsAndReportsEachLocation() {
        List<UnifiedBuffer> all = new ArrayList<>();
        for (int i = 0; i < 12; i++) {
            UnifiedBuffer buffer = manager.allocate(3 << 20, MemoryLocation.DEVICE);
            buffer.copyFrom(new byte[] {(byte) i});
            all.add(buffer);
        }
        for (int i = 1; i < 11; i++) {
            all.get(i).close();
        }

        ComputeMemoryEndpoint.CompactionDescriptor compacted = (ComputeMemoryEndpoint.CompactionDescriptor) endpoint.trim(null, true, null);

        ComputeMemoryEndpoint.ManagerCompaction mine = compacted.managers().get("default");
        ComputeMemoryEndpoint.LocationCompaction device = mine.locations().get(MemoryLocation.DEVICE);
        assertThat(mine.locations()).containsOnlyKeys(manager.locations().toArray(MemoryLocation[]::new));
        assertThat(device.buffersMoved()).as("one buffer into the other's segment, maybe one more down in it").isBetween(1L, 2L);
        assertThat(device.bytesMoved()).isEqualTo(device.buffersMoved() * (3 << 20));
        assertThat(device.reservedBytesAfter()).isLessThan(device.reservedBytesBefore());
        assertThat(compacted.releasedBytes()).isEqualTo(mine.releasedBytes()).isPositive();
        assertThat(mine.reservedBytesAfter()).containsEntry(MemoryLocation.DEVICE, manager.statistics(MemoryLocation.DEVICE).reservedBytes());
        byte[] first = new byte[1];
        all.getFirst().copyTo(first);
        assertThat(first[0]).as("each buffer kept its data, moved or not").isEqualTo((byte) 0);
        all.getLast().copyTo(first);
        assertThat(first[0]).isEqualTo((byte) 11);
        all.getFirst().close();
        all.getLast().close();
    }

    @Test
    void leaksAreCountedAndOpenBuffersGroupedBySiteMostBytesFirst() throws InterruptedException {
        try (UnifiedMemoryManager paranoid = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend(64L << 20))
                .leakDetection(LeakDetectionLevel.PARANOID).pinningEnabled(false).build()) {
            ComputeMemoryEndpoint leakEndpoint = endpointOf(Map.of("unifiedMemoryManager", paranoid), paranoid);
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
            List<String> blockSites = leakEndpoint.location(ComputeMemoryAutoConfiguration.DEFAULT_MANAGER_NAME, MemoryLocation.DEVICE).segments().stream()
                    .flatMap(segment -> segment.blocks().stream()).map(ComputeMemoryEndpoint.BlockDescriptor::allocationSite)
                    .filter(Objects::nonNull).toList();
            assertThat(blockSites).as("each live block's site in the location view, shortened as the summary's")
                    .hasSize(4).filteredOn(site -> site.contains("allocateInALoop")).hasSize(3)
                    .allSatisfy(site -> assertThat(site).isEqualTo(open.openBuffers().getFirst().allocationSite()));

            dropUnclosed(paranoid);
            // a collection and the Cleaner's thread, neither bound in time on a loaded machine
            for (long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30); paranoid.leaksDetected() == 0 && System.nanoTime() < deadline; ) {
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
