package dev.compute.memory.resource;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemorySnapshot;
import dev.compute.memory.resource.BackendResource.WholeAllocation;
import dev.compute.memory.spi.NativeAllocation;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The books of frees a backend refused or left unfinished: what is taken back out, and how they show. */
class FailedFreesTest {

    private static WholeAllocation allocation(long address, long bytes) {
        return new WholeAllocation(new NativeAllocation(MemoryLocation.DEVICE, address, bytes, null, null), bytes);
    }

    @Test
    void aRefusedFreeIsTakenBackOutOnlyForItsOwnBlock() {
        FailedFrees failed = new FailedFrees();
        WholeAllocation refused = allocation(0x1000, 4096);
        failed.refused(refused);

        assertThat(failed.takeRefused(refused.segment(), allocation(0x1000, 4096))).as("another block at the same place").isNull();
        assertThat(failed.largestRefused()).isEqualTo(4096);
        assertThat(failed.takeRefused(refused.segment(), refused)).isSameAs(refused);
        assertThat(failed.takeRefused(refused.segment(), refused)).as("taken once").isNull();
        assertThat(failed.largestRefused()).isZero();
    }

    @Test
    void refusedFreesAreTakenOutUntilNoMoreThanTheBytesToKeepAreLeft() {
        FailedFrees failed = new FailedFrees();
        for (int i = 1; i <= 3; i++) {
            failed.refused(allocation(i * 0x10000L, 1 << 20));
        }

        assertThat(failed.takeRefusedBeyond(2L << 20)).hasSize(1);
        assertThat(failed.takeRefusedBeyond(-1)).as("a negative keep is none").hasSize(2);
        assertThat(failed.takeRefusedBeyond(0)).isEmpty();
    }

    @Test
    void unfinishedFreesCountTheirBytesAndShowAsReleasingBesideRefusedOnesShownFree() {
        FailedFrees failed = new FailedFrees();
        failed.unfinished(allocation(0x1000, 4096));
        failed.unfinished(allocation(0x2000, 8192));
        failed.refused(allocation(0x3000, 512));

        assertThat(failed.unfinishedBytes()).isEqualTo(12288);
        List<MemorySnapshot.Segment> all = new ArrayList<>();
        failed.addSegments(all, true);
        assertThat(all).extracting(segment -> segment.blocks().getFirst().state()).containsExactlyInAnyOrder(
                MemorySnapshot.BlockState.FREE, MemorySnapshot.BlockState.RELEASING, MemorySnapshot.BlockState.RELEASING);
        List<MemorySnapshot.Segment> unfinishedOnly = new ArrayList<>();
        failed.addSegments(unfinishedOnly, false);
        assertThat(unfinishedOnly).hasSize(2);

        assertThat(failed.takeUnfinished()).hasSize(2);
        assertThat(failed.unfinishedBytes()).isZero();
        assertThat(failed.takeUnfinished()).isEmpty();
    }
}
