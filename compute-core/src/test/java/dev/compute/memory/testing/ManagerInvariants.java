package dev.compute.memory.testing;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemorySnapshot;
import dev.compute.memory.MemoryStatistics;
import dev.compute.memory.UnifiedMemoryManager;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

/**
 * What must hold of a manager's pools at every location: blocks tile their segments, segments do not overlap,
 * and the statistics agree with the blocks. {@link #checkQuiescent} needs no concurrent allocation;
 * {@link #checkStructure} holds at any moment.
 */
public final class ManagerInvariants {
    private ManagerInvariants() {}

    /** Structure only: safe while other threads allocate. */
    public static void checkStructure(UnifiedMemoryManager manager) {
        for (MemoryLocation location : manager.locations()) {
            checkSegments(location, manager.snapshot(location));
            MemoryStatistics s = manager.statistics(location);
            assertThat(s.reservedBytes()).as("%s reserved", location).isNotNegative();
            assertThat(s.fragmentation()).as("%s fragmentation", location).isBetween(0.0, 1.0);
        }
    }

    /** Structure, and statistics equal to the sum of the live blocks: no thread may allocate meanwhile. */
    public static void checkQuiescent(UnifiedMemoryManager manager) {
        for (MemoryLocation location : manager.locations()) {
            MemorySnapshot snapshot = manager.snapshot(location);
            checkSegments(location, snapshot);
            MemoryStatistics s = manager.statistics(location);
            List<MemorySnapshot.Block> live = snapshot.segments().stream().flatMap(g -> g.blocks().stream())
                    .filter(b -> b.state() == MemorySnapshot.BlockState.LIVE).toList();
            // the host mirrors of device buffers are live blocks here, and no buffer of the user's
            assertThat(s.liveBuffers()).as("%s live buffers", location).isBetween(0L, (long) live.size());
            assertThat(s.allocatedBytes()).as("%s allocated = sum of live blocks", location)
                    .isEqualTo(live.stream().mapToLong(MemorySnapshot.Block::sizeBytes).sum());
            assertThat(s.requestedBytes()).as("%s requested = sum of live requests", location)
                    .isEqualTo(live.stream().mapToLong(MemorySnapshot.Block::requestedBytes).sum());
            assertThat(s.requestedBytes()).isLessThanOrEqualTo(s.allocatedBytes());
            assertThat(s.reservedBytes()).as("%s reserved covers allocated", location).isGreaterThanOrEqualTo(s.allocatedBytes());
            assertThat(s.cachedBytes()).isEqualTo(s.reservedBytes() - s.allocatedBytes());
            assertThat(s.allocations() - s.frees()).as("%s allocations less frees", location).isEqualTo(live.size());
        }
    }

    private static void checkSegments(MemoryLocation location, MemorySnapshot snapshot) {
        List<MemorySnapshot.Segment> segments = new ArrayList<>(snapshot.segments());
        segments.sort(Comparator.comparingLong(MemorySnapshot.Segment::address));
        long previousEnd = Long.MIN_VALUE;
        for (MemorySnapshot.Segment segment : segments) {
            assertThat(segment.address()).as("%s segments overlap", location).isGreaterThanOrEqualTo(previousEnd);
            previousEnd = segment.address() + segment.sizeBytes();
            long offset = 0;
            for (MemorySnapshot.Block block : segment.blocks()) {
                assertThat(block.offset()).as("%s blocks tile segment %x", location, segment.address()).isEqualTo(offset);
                assertThat(block.sizeBytes()).isPositive();
                offset += block.sizeBytes();
            }
            assertThat(offset).as("%s blocks cover segment %x", location, segment.address()).isEqualTo(segment.sizeBytes());
        }
    }
}
