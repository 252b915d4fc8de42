package dev.compute.memory.resource.pool;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.MemoryLocation;
import dev.compute.memory.resource.BackendResource;
import dev.compute.memory.resource.Block;
import dev.compute.memory.resource.PoolSettings;
import dev.compute.memory.resource.StatisticsResource;
import dev.compute.memory.MemorySnapshot;
import dev.compute.memory.testing.AddressSpaceBackend;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/** What must hold of a pool at every quiet moment, checked against the blocks a test holds and the backend's books. */
final class PoolInvariants {

    private PoolInvariants() {}

    /** {@code live} are the blocks handed out and not freed; {@code statistics} wraps {@code pool}. */
    static void check(CachingPoolResource pool, StatisticsResource statistics, AddressSpaceBackend backend, Collection<Block> live) {
        List<MemorySnapshot.Segment> segments = pool.segments();
        Map<String, MemorySnapshot.Block> byPlace = new HashMap<>();
        long liveInSnapshot = 0;
        long largestFree = 0;
        for (MemorySnapshot.Segment segment : segments) {
            long at = 0;
            for (MemorySnapshot.Block block : segment.blocks()) {
                assertThat(block.offset()).as("blocks tile segment 0x%x", segment.address()).isEqualTo(at);
                assertThat(block.sizeBytes()).isPositive();
                at += block.sizeBytes();
                if (block.state() == MemorySnapshot.BlockState.FREE) {
                    largestFree = Math.max(largestFree, block.sizeBytes());
                }
                if (block.state() == MemorySnapshot.BlockState.LIVE) {
                    byPlace.put(segment.address() + ":" + block.offset(), block);
                    liveInSnapshot += block.sizeBytes();
                }
                if (!segment.expandable()) {
                    assertThat(block.state()).isNotEqualTo(MemorySnapshot.BlockState.UNMAPPED);
                }
            }
            assertThat(at).as("blocks tile segment 0x%x", segment.address()).isEqualTo(segment.sizeBytes());
        }

        long liveBytes = 0;
        long requestedBytes = 0;
        for (Block block : live) {
            MemorySnapshot.Block seen = byPlace.get(block.segment().address() + ":" + block.offset());
            assertThat(seen).as("live %s is a LIVE block of the snapshot at its segment and offset", block).isNotNull();
            assertThat(seen.sizeBytes()).isEqualTo(block.size());
            assertThat(block.size()).isGreaterThanOrEqualTo(block.requestedSize());
            liveBytes += block.size();
            requestedBytes += block.requestedSize();
        }
        assertThat(liveInSnapshot).as("the snapshot has no live block the test does not hold").isEqualTo(liveBytes);

        List<Block> ordered = new ArrayList<>(live);
        ordered.sort(Comparator.comparingLong(b -> b.segment().address() + b.offset()));
        for (int i = 1; i < ordered.size(); i++) {
            Block before = ordered.get(i - 1);
            Block after = ordered.get(i);
            assertThat(before.segment().address() + before.offset() + before.size())
                    .as("%s and %s do not overlap", before, after)
                    .isLessThanOrEqualTo(after.segment().address() + after.offset());
        }

        PoolFigures figures = PoolFigures.figures(statistics, pool);
        assertThat(figures.allocatedBytes()).as("allocated = the live blocks").isEqualTo(liveBytes);
        assertThat(figures.requestedBytes()).as("requested = what the live blocks asked").isEqualTo(requestedBytes);
        assertThat(figures.reservedBytes()).as("reserved = the backend's memory in use").isEqualTo(backend.usedBytes());
        assertThat(figures.reservedBytes()).isGreaterThanOrEqualTo(liveBytes);
        assertThat(figures.reservedBytesPeak()).isGreaterThanOrEqualTo(figures.reservedBytes());
        assertThat(figures.largestFreeBlockBytes()).as("the largest free block of the snapshot").isEqualTo(largestFree)
                .isLessThanOrEqualTo(Math.max(0, figures.reservedBytes() - liveBytes));
        assertThat(figures.segments()).isEqualTo(segments.size());
    }
}
