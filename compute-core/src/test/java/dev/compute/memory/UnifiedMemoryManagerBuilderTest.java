package dev.compute.memory;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.resource.PoolSettings;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import java.time.Duration;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.Test;

/** Every setting that makes no sense is refused with the property's name, the value and what is allowed. */
class UnifiedMemoryManagerBuilderTest {

    private static void refused(UnaryOperator<UnifiedMemoryManagerBuilder> setting, String property, String allowed) {
        SimulatedDiscreteBackend backend = new SimulatedDiscreteBackend();
        assertThatThrownBy(() -> setting.apply(UnifiedMemoryManager.builder().backend(backend)).build())
                .isInstanceOfSatisfying(InvalidSettingException.class, e -> {
                    assertThat(e.property()).isEqualTo(property);
                    assertThat(e.allowed()).contains(allowed);
                });
        assertThat(backend.liveAllocations()).isZero();
    }

    @Test
    void refusesSizesThatMakeNoSense() {
        refused(b -> b.maxPoolSize(0), "compute.memory.pooling.max-pool-size", "positive");
        refused(b -> b.maxPoolSize(-1), "compute.memory.pooling.max-pool-size", "positive");
        refused(b -> b.maxPoolSize(PoolSize.ofBytes(-1)), "compute.memory.pooling.max-pool-size", "positive");
        refused(b -> b.releaseThreshold(-1), "compute.memory.pooling.release-threshold", "0 or more");
        refused(b -> b.maxPinnedSize(0), "compute.memory.pinning.max-pinned-size", "positive");
        refused(b -> b.stagingBufferSize(-5), "compute.memory.pinning.staging-buffer-size", "positive");
        refused(b -> b.name(" "), "name", "a name the log can call the manager by");
        refused(b -> b.maxPinnedSize(64L << 20).stagingBufferSize(128L << 20), "compute.memory.pinning.staging-buffer-size",
                "at most compute.memory.pinning.max-pinned-size (67108864 bytes)");
    }

    @Test
    void aBackendOptionWithoutAValueIsRefusedWhereItIsGivenNamingIt() {
        assertThatThrownBy(() -> UnifiedMemoryManager.builder().backendOption("platform", null))
                .isInstanceOf(NullPointerException.class).hasMessage("backend option 'platform' needs a value");
    }

    @Test
    void mappedFilesMayBeLimitedOrTurnedOffButNotNegative() {
        refused(b -> b.maxOpenMappedFiles(-1), "compute.memory.mapped-files.max-open", "0 (mapping off)");
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend())
                .timelineInterval(Duration.ZERO).build()) {
            assertThat(manager.settings().maxOpenMappedFiles()).isEqualTo(UnifiedMemoryManagerBuilder.DEFAULT_MAX_OPEN_MAPPED_FILES);
            assertThat(manager.mappedFileStatistics().maxOpenMappings()).isEqualTo(UnifiedMemoryManagerBuilder.DEFAULT_MAX_OPEN_MAPPED_FILES);
        }
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend())
                .maxOpenMappedFiles(0).timelineInterval(Duration.ZERO).build()) {
            assertThat(manager.settings().maxOpenMappedFiles()).isZero();
        }
    }

    @Test
    void refusesAReleaseThresholdAboveThePoolCap() {
        refused(b -> b.maxPoolSize(4 << 20).releaseThreshold(8 << 20), "compute.memory.pooling.release-threshold", "max-pool-size");
    }

    @Test
    void refusesACapUnderThePoolsSmallestPieceWhilePoolingIsOn() {
        refused(b -> b.maxPoolSize(PoolSettings.MIN_CAP_BYTES - 1), "compute.memory.pooling.max-pool-size", "while pooling is on");
        refused(b -> b.maxPinnedSize(1 << 20), "compute.memory.pinning.max-pinned-size", "while pooling is on");
        refused(b -> b.maxPoolSize(PoolSize.ofShare(0.001)), "compute.memory.pooling.max-pool-size", "while pooling is on");
    }

    @Test
    void theSmallestCapAllowedHoldsAllocationsInEitherLayout() {
        for (boolean expandable : new boolean[] {true, false}) {
            try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend())
                    .expandableSegments(expandable).maxPoolSize(PoolSettings.MIN_CAP_BYTES).maxPinnedSize(PoolSettings.MIN_CAP_BYTES)
                    .timelineInterval(Duration.ZERO).build()) {
                manager.allocate(1024, MemoryLocation.PINNED).close();
                manager.allocate(1024, MemoryLocation.DEVICE).close();
                manager.allocate(PoolSettings.MIN_CAP_BYTES, MemoryLocation.DEVICE).close();
            }
        }
        try (UnifiedMemoryManager unpooled = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend()).poolingEnabled(false)
                .maxPoolSize(1 << 20).maxPinnedSize(1 << 20).releaseThreshold(0).timelineInterval(Duration.ZERO).build()) {
            unpooled.allocate(1024, MemoryLocation.PINNED).close();
        }
    }

    @Test
    void anUnsetReleaseThresholdFollowsASmallerCap() {
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend())
                .maxPoolSize(128L << 20).timelineInterval(Duration.ZERO).build()) {
            manager.allocate(1 << 20, MemoryLocation.DEVICE).close();
        }
        assertThat(UnifiedMemoryManager.builder().releaseThresholdUnder(128L << 20)).isEqualTo(128L << 20);
        assertThat(UnifiedMemoryManager.builder().releaseThresholdUnder(1L << 30))
                .isEqualTo(UnifiedMemoryManagerBuilder.DEFAULT_RELEASE_THRESHOLD);
        assertThat(UnifiedMemoryManager.builder().releaseThreshold(0).releaseThresholdUnder(128L << 20)).isZero();
        refused(b -> b.maxPoolSize(128L << 20).releaseThreshold(UnifiedMemoryManagerBuilder.DEFAULT_RELEASE_THRESHOLD),
                "compute.memory.pooling.release-threshold", "at most compute.memory.pooling.max-pool-size (134217728 bytes)");
    }

    @Test
    void aShareOfTheDevicesMemoryIsResolvedAtStartAndReported() {
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend(400L << 20))
                .maxPoolSize(PoolSize.ofShare(0.25)).timelineInterval(Duration.ZERO).build()) {
            assertThat(manager.settings().maxPoolSize()).isEqualTo(100L << 20);
            assertThat(manager.settings().maxPoolSizeShare()).isEqualTo(0.25);
            assertThat(manager.settings().releaseThreshold()).as("the default threshold follows the resolved cap").isEqualTo(100L << 20);
            assertThatThrownBy(() -> manager.allocate(101L << 20, MemoryLocation.DEVICE)).isInstanceOf(DeviceOutOfMemoryException.class)
                    .hasMessageContaining("above compute.memory.pooling.max-pool-size (104857600 bytes)");
        }
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend())
                .maxPoolSize(64L << 20).timelineInterval(Duration.ZERO).build()) {
            assertThat(manager.settings().maxPoolSizeShare()).as("a cap in bytes comes from no share").isNull();
        }
    }

    @Test
    void refusesASharePastTheWholeDeviceOrOfNothing() {
        refused(b -> b.maxPoolSize(PoolSize.ofShare(0)), "compute.memory.pooling.max-pool-size", "above 0% and at most 100%");
        refused(b -> b.maxPoolSize(PoolSize.ofShare(1.2)), "compute.memory.pooling.max-pool-size", "above 0% and at most 100%");
        refused(b -> b.maxPoolSize(PoolSize.ofShare(-0.05)), "compute.memory.pooling.max-pool-size", "above 0% and at most 100%");
        refused(b -> b.maxPoolSize(PoolSize.ofShare(Double.NaN)), "compute.memory.pooling.max-pool-size", "above 0% and at most 100%");
        refused(b -> b.maxPoolSize(null), "compute.memory.pooling.max-pool-size", "a value is required");
        assertThatThrownBy(() -> UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend()).maxPoolSize(PoolSize.ofShare(1.2)).build())
                .hasMessageContaining("'120%'");
    }

    @Test
    void aReleaseThresholdAboveTheResolvedShareStopsTheStartSayingWhereTheCapCameFrom() {
        refused(b -> b.maxPoolSize(PoolSize.ofShare(0.05)).releaseThreshold(64L << 20), "compute.memory.pooling.release-threshold",
                "at most compute.memory.pooling.max-pool-size (53687091 bytes, 5% of the device)");
    }

    @Test
    void anUnsetStagingBufferFollowsASmallerMaxPinnedSize() {
        assertThat(UnifiedMemoryManager.builder().maxPinnedSize(4L << 20).stagingBufferSize()).isEqualTo(4L << 20);
        assertThat(UnifiedMemoryManager.builder().stagingBufferSize()).isEqualTo(UnifiedMemoryManagerBuilder.DEFAULT_STAGING_BUFFER_SIZE);
        assertThat(UnifiedMemoryManager.builder().maxPinnedSize(4L << 20).stagingBufferSize(32L << 20).stagingBufferSize())
                .as("a size the user set stands").isEqualTo(32L << 20);
    }

    @Test
    void refusesAWaitOrIntervalTooLongToCountInNanosecondsRatherThanFailLater() {
        Duration forever = Duration.ofSeconds(Long.MAX_VALUE);
        refused(b -> b.closeTimeout(forever), "compute.memory.close-timeout", "at most 365d");
        refused(b -> b.deviceWaitTimeout(forever), "compute.memory.device-wait-timeout", "at most 365d");
        refused(b -> b.trimInterval(forever), "compute.memory.pooling.trim-interval", "at most 365d");
        refused(b -> b.timelineInterval(UnifiedMemoryManagerBuilder.MAX_DURATION.plusMillis(1)), "compute.memory.timeline.interval", "at most 365d");
        try (UnifiedMemoryManager longest = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend())
                .closeTimeout(UnifiedMemoryManagerBuilder.MAX_DURATION).deviceWaitTimeout(UnifiedMemoryManagerBuilder.MAX_DURATION)
                .trimInterval(UnifiedMemoryManagerBuilder.MAX_DURATION).timelineInterval(Duration.ZERO).build()) {
            longest.allocate(4096).close();
        }
    }

    @Test
    void refusesNegativeIntervalsAndDevices() {
        refused(b -> b.trimInterval(Duration.ofSeconds(-1)), "compute.memory.pooling.trim-interval", "0 (off) or a duration of at least 1ms");
        refused(b -> b.trimInterval(Duration.ofNanos(500_000)), "compute.memory.pooling.trim-interval", "at least 1ms");
        refused(b -> b.compactionInterval(Duration.ofSeconds(-1)), "compute.memory.pooling.compaction-interval", "0 (off) or a duration of at least 1ms");
        refused(b -> b.timelineInterval(Duration.ofMillis(-1)), "compute.memory.timeline.interval", "0 (off)");
        refused(b -> b.timelineCapacity(0), "compute.memory.timeline.capacity", "from 1 to");
        refused(b -> b.timelineCapacity(UnifiedMemoryManagerBuilder.MAX_TIMELINE_CAPACITY + 1), "compute.memory.timeline.capacity", "from 1 to");
        refused(b -> b.device(-1), "compute.device", "0 or more");
    }

    @Test
    void refusesAnUnknownBackendNamingTheKnownOnes() {
        assertThatThrownBy(() -> UnifiedMemoryManager.builder().backend("quantum").build())
                .isInstanceOfSatisfying(InvalidSettingException.class, e -> {
                    assertThat(e.property()).isEqualTo("compute.backend");
                    assertThat(e.value()).isEqualTo("quantum");
                    assertThat(e.allowed()).contains("auto");
                });
    }

    @Test
    void refusesADefaultLocationTheBackendDoesNotOffer() {
        SimulatedDiscreteBackend backend = new SimulatedDiscreteBackend();
        assertThatThrownBy(() -> UnifiedMemoryManager.builder().backend(backend).pinningEnabled(false)
                .defaultLocation(MemoryLocation.PINNED).build())
                .isInstanceOfSatisfying(InvalidSettingException.class, e -> assertThat(e.property()).isEqualTo("compute.memory.default-location"));
        assertThat(backend.isClosed()).as("a manager that failed to start closes its backend").isTrue();
    }

    @Test
    void pinningOffRemovesPinnedMemoryWithAReason() {
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend())
                .pinningEnabled(false).timelineInterval(Duration.ZERO).build()) {
            assertThat(manager.locations()).doesNotContain(MemoryLocation.PINNED);
            assertThatThrownBy(() -> manager.allocate(16, MemoryLocation.PINNED)).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("compute.memory.pinning.enabled=false");
            // mirrors of device buffers come from ordinary host memory then
            try (UnifiedBuffer buffer = manager.allocate(16, MemoryLocation.DEVICE)) {
                buffer.hostView();
                assertThat(manager.statistics(MemoryLocation.HOST).allocatedBytes()).as("the mirror's").isPositive();
            }
        }
    }

    @Test
    void withoutPoolingTheCapIsStillEnforced() {
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend())
                .poolingEnabled(false).maxPoolSize(1 << 20).releaseThreshold(0).timelineInterval(Duration.ZERO).build()) {
            UnifiedBuffer big = manager.allocate(900_000, MemoryLocation.DEVICE);
            assertThatThrownBy(() -> manager.allocate(200_000, MemoryLocation.DEVICE))
                    .isInstanceOf(DeviceOutOfMemoryException.class).hasMessageContaining("max-pool-size");
            big.close();
            manager.allocate(200_000, MemoryLocation.DEVICE).close();
            assertThat(manager.statistics(MemoryLocation.DEVICE).reservedBytes()).isZero();
        }
    }

    @Test
    void aRequestAboveACapNamesThatCapsProperty() {
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend())
                .maxPoolSize(8 << 20).maxPinnedSize(4 << 20).timelineInterval(Duration.ZERO).build()) {
            assertThatThrownBy(() -> manager.allocate(9 << 20, MemoryLocation.DEVICE)).isInstanceOf(DeviceOutOfMemoryException.class)
                    .hasMessageContaining("above compute.memory.pooling.max-pool-size (8388608 bytes)");
            assertThatThrownBy(() -> manager.allocate(5 << 20, MemoryLocation.PINNED)).isInstanceOf(DeviceOutOfMemoryException.class)
                    .hasMessageContaining("above compute.memory.pinning.max-pinned-size (4194304 bytes)");
        }
    }

    @Test
    void timelineSamplesAreKeptInABoundedRing() throws InterruptedException {
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend())
                .timelineCapacity(3).timelineInterval(Duration.ofMillis(10)).build()) {
            UnifiedBuffer kept = manager.allocate(1000, MemoryLocation.DEVICE);
            Thread.sleep(100);
            assertThat(manager.timeline(MemoryLocation.DEVICE)).hasSize(3)
                    .allSatisfy(s -> assertThat(s.allocatedBytes()).isGreaterThanOrEqualTo(1000));
            kept.close();
        }
    }
}
