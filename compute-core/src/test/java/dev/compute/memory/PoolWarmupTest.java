package dev.compute.memory;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.Test;

/** The warm-up at start, on the simulated device (plain segments: exact ones from 10 MiB up, 20 MiB ones below). */
class PoolWarmupTest {

    private static final long MiB = 1L << 20;
    private static final MemoryLocation DEVICE = MemoryLocation.DEVICE;

    private static UnifiedMemoryManager start(UnaryOperator<UnifiedMemoryManagerBuilder> settings) {
        return settings.apply(UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend()).timelineInterval(Duration.ZERO)).build();
    }

    @Test
    void theWarmUpIsReservedAndCachedAtStartAndTheFirstRequestsMakeNoBackendCall() {
        try (UnifiedMemoryManager manager = start(b -> b.warmup(DEVICE, 16 * MiB, 4).warmup(DEVICE, 64 * 1024, 16))) {
            MemoryStatistics atStart = manager.statistics(DEVICE);
            assertThat(atStart.reservedBytes()).as("the small blocks in four segments of 256 KiB, a small arena's first")
                    .isEqualTo(64 * MiB + MiB);
            assertThat(atStart.cachedBytes()).isEqualTo(atStart.reservedBytes());
            assertThat(atStart.allocations()).as("the warm-up is the pool's, not an allocation").isZero();
            assertThat(atStart.poolHits()).as("nor a hit or a miss: no caller asked for it").isZero();
            assertThat(atStart.poolMisses()).isZero();
            assertThat(atStart.backendAllocations()).as("the segments it took").isPositive();
            assertThat(manager.settings().warmup()).isEqualTo(Map.of(DEVICE, List.of(new WarmupBlocks(16 * MiB, 4), new WarmupBlocks(64 * 1024, 16))));
            MemoryStatistics host = manager.statistics(MemoryLocation.HOST);
            assertThat(host.reservedBytes()).as("other locations are left alone").isZero();

            for (int i = 0; i < 4; i++) {
                manager.allocate(16 * MiB, DEVICE).close();
                manager.allocate(64 * 1024, DEVICE).close();
            }

            assertThat(manager.statistics(DEVICE).backendAllocations()).isEqualTo(atStart.backendAllocations());
            assertThat(manager.statistics(DEVICE).poolHits()).isEqualTo(8);
            assertThat(manager.statistics(DEVICE).hitRate()).as("what the warm-up is for").isEqualTo(1.0);
        }
    }

    @Test
    void theWarmUpSurvivesTrimsUpToTheReleaseThresholdButNotAReleaseOfAllCache() {
        try (UnifiedMemoryManager manager = start(b -> b.warmup(DEVICE, 32 * MiB, 2).releaseThreshold(64 * MiB))) {
            long reserved = manager.statistics(DEVICE).reservedBytes();

            assertThat(manager.trim()).isZero();
            assertThat(manager.statistics(DEVICE).reservedBytes()).isEqualTo(reserved).isEqualTo(64 * MiB);

            manager.allocate(16 * MiB, DEVICE).close();
            assertThat(manager.trim()).as("after use as before").isZero();
            assertThat(manager.releaseCachedMemory()).isEqualTo(64 * MiB);
            assertThat(manager.statistics(DEVICE).reservedBytes()).isZero();
        }
    }

    @Test
    void anUnsetReleaseThresholdFollowsALargerWarmUp() {
        try (UnifiedMemoryManager manager = start(b -> b.warmup(DEVICE, 16 * MiB, 17))) {
            assertThat(manager.settings().releaseThreshold()).isEqualTo(272 * MiB);
            assertThat(manager.trim()).isZero();
            assertThat(manager.statistics(DEVICE).reservedBytes()).isEqualTo(272 * MiB);
        }
    }

    private static void refused(UnaryOperator<UnifiedMemoryManagerBuilder> settings, String property, String... allowed) {
        SimulatedDiscreteBackend backend = new SimulatedDiscreteBackend(256 * MiB);
        assertThatThrownBy(() -> settings.apply(UnifiedMemoryManager.builder().backend(backend).timelineInterval(Duration.ZERO)).build())
                .isInstanceOfSatisfying(InvalidSettingException.class, e -> {
                    assertThat(e.property()).isEqualTo(property);
                    assertThat(e.allowed()).contains(allowed);
                });
        assertThat(backend.liveAllocations()).as("nothing kept from a failed start").isZero();
    }

    @Test
    void aWarmUpAboveTheReleaseThresholdStopsTheStartNamingBothProperties() {
        refused(b -> b.warmup(DEVICE, 16 * MiB, 3).releaseThreshold(32 * MiB), "compute.memory.pooling.warmup.device",
                "compute.memory.pooling.release-threshold (33554432 bytes)", "warm up less");
    }

    @Test
    void aWarmUpThatSegmentsWouldPushPastTheReleaseThresholdStopsTheStart() {
        // 1.5 MiB blocks come from 20 MiB segments, 13 to a segment: two segments, and the trim gives one back
        refused(b -> b.warmup(DEVICE, 3 * MiB / 2, 16).releaseThreshold(32 * MiB), "compute.memory.pooling.warmup.device",
                "compute.memory.pooling.release-threshold (33554432 bytes) in the pool's segments", "kept 20971520 bytes");
    }

    /**
     * Within the cap in bytes, but not in the whole pieces the pool takes memory in: a block of 1.5 MiB takes a plain
     * segment of 2 MiB, and under a cap of 5 MiB there is room for two, where three are asked for. The start stops with
     * one clear reason, naming the cap, not the pool's out-of-memory report.
     */
    @Test
    void aWarmUpWithinTheCapInBytesButNotInThePoolsPiecesStopsTheStartSayingWhy() {
        assertThatThrownBy(() -> start(b -> b.warmup(DEVICE, 3 * MiB / 2, 3).maxPoolSize(5 * MiB)))
                .isInstanceOfSatisfying(InvalidSettingException.class, e -> {
                    assertThat(e.property()).isEqualTo("compute.memory.pooling.warmup.device");
                    assertThat(e.value()).isEqualTo(9 * MiB / 2 + " bytes in all");
                    assertThat(e.allowed()).isEqualTo("a warm-up whose blocks fit under compute.memory.pooling.max-pool-size (" + 5 * MiB
                            + " bytes) in the pool's pieces (plain segments, in whole " + 2 * MiB + " bytes for blocks over " + MiB
                            + " bytes and 65536 for smaller ones), where they take " + 6 * MiB
                            + " bytes; raise compute.memory.pooling.max-pool-size or warm up less");
                });
    }

    /** Blocks up to 1 MiB take plain segments in whole 64 KiB: five of 1 MiB fill a cap of 5 MiB exactly, and warm up. */
    @Test
    void smallBlocksThatFillTheCapExactlyWarmUp() {
        try (UnifiedMemoryManager manager = start(b -> b.warmup(DEVICE, MiB, 5).maxPoolSize(5 * MiB))) {
            assertThat(manager.statistics(DEVICE).reservedBytes()).isEqualTo(5 * MiB);
            List<UnifiedBuffer> held = new ArrayList<>();
            for (int i = 0; i < 5; i++) {
                held.add(manager.allocate(MiB, DEVICE));
            }
            assertThat(manager.statistics(DEVICE).poolHits()).isEqualTo(5);
            held.forEach(UnifiedBuffer::close);
        }
    }

    /**
     * At the cap a small block takes the free space after a large one in its plain segment: 1,900 KiB and 64 KiB warm
     * up in one segment of 2 MiB under a cap of 2 MiB (the start was refused, the small block counted in a segment of
     * its own).
     */
    @Test
    void aSmallBlockInALargeBlocksSegmentAtTheCapWarmsUp() {
        try (UnifiedMemoryManager manager = start(b -> b.warmup(DEVICE, 1900 * 1024, 1).warmup(DEVICE, 64 * 1024, 1).maxPoolSize(2 * MiB))) {
            assertThat(manager.statistics(DEVICE).reservedBytes()).isEqualTo(2 * MiB);
        }
    }

    /**
     * Within the cap in pieces too, yet not as the pool places blocks: each 3 MiB block takes a plain segment of 4 MiB
     * of its own, and a cap of 6 MiB holds one. The start stops with one clear reason, naming the cap, not the pool's
     * out-of-memory report.
     */
    @Test
    void aWarmUpWhoseBlocksThePoolCannotPlaceUnderTheCapStopsTheStartSayingWhy() {
        assertThatThrownBy(() -> start(b -> b.warmup(DEVICE, 3 * MiB, 2).maxPoolSize(6 * MiB)))
                .isInstanceOfSatisfying(InvalidSettingException.class, e -> {
                    assertThat(e.property()).isEqualTo("compute.memory.pooling.warmup.device");
                    assertThat(e.value()).isEqualTo(6 * MiB + " bytes in all");
                    assertThat(e.allowed()).isEqualTo("a warm-up whose blocks the pool can place under compute.memory.pooling.max-pool-size ("
                            + 6 * MiB + " bytes): block 2 of 2 (" + 3 * MiB + " bytes) did not fit beside those before it, in the "
                            + 4 * MiB + " bytes the pool held; raise compute.memory.pooling.max-pool-size or warm up less");
                });
    }

    @Test
    void aWarmUpTheDeviceCannotGiveStopsTheStart() {
        refused(b -> b.warmup(DEVICE, 128 * MiB, 3).releaseThreshold(1L << 30), "compute.memory.pooling.warmup.device", "it refused");
    }

    @Test
    void warmUpsThatMakeNoSenseAreRefused() {
        refused(b -> b.warmup(DEVICE, 16 * MiB, 2).maxPoolSize(16 * MiB), "compute.memory.pooling.warmup.device",
                "at most compute.memory.pooling.max-pool-size (16777216 bytes)");
        refused(b -> b.warmup(MemoryLocation.PINNED, 4 * MiB, 2).maxPinnedSize(4 * MiB), "compute.memory.pooling.warmup.pinned",
                "at most compute.memory.pinning.max-pinned-size");
        refused(b -> b.warmup(DEVICE, 0, 2), "compute.memory.pooling.warmup.device", "a positive size");
        refused(b -> b.warmup(DEVICE, MiB, 0), "compute.memory.pooling.warmup.device", "a count of 1 or more");
        refused(b -> b.warmup(DEVICE, Long.MAX_VALUE / 2, 3), "compute.memory.pooling.warmup.device", "a total of at most");
        refused(b -> b.warmup(DEVICE, MiB, 1).poolingEnabled(false), "compute.memory.pooling.warmup", "compute.memory.pooling.enabled is false");
        refused(b -> b.warmup(MemoryLocation.PINNED, MiB, 1).pinningEnabled(false), "compute.memory.pooling.warmup.pinned",
                "compute.memory.pinning.enabled is false");
    }
}
