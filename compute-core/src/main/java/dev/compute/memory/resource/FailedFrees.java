package dev.compute.memory.resource;

import dev.compute.memory.MemorySnapshot;
import dev.compute.memory.resource.BackendResource.WholeAllocation;
import dev.compute.memory.spi.NativeAllocation;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * The allocations a {@link BackendResource} freed and the backend did not take back: those whose free it refused (as they
 * were, usable: reserved and free, for a later free, trim or the close to try again) and those whose free it left
 * unfinished ({@link dev.compute.memory.spi.FreeUnfinishedException}: held, no longer usable, reserved and out of use
 * until a trim or the close finishes it). Guarded by the resource's monitor; {@link #unfinishedBytes} is read without it.
 */
final class FailedFrees {

    private final Map<NativeAllocation, WholeAllocation> refused = new HashMap<>();
    private final Map<NativeAllocation, WholeAllocation> unfinished = new HashMap<>();
    private volatile long unfinishedBytes;

    void refused(WholeAllocation whole) {
        refused.put(whole.segment(), whole);
    }

    void unfinished(WholeAllocation whole) {
        unfinished.put(whole.segment(), whole);
        unfinishedBytes += whole.size();
    }

    /** {@code block}, taken out to be freed again, where its free was refused before; else null. */
    @Nullable WholeAllocation takeRefused(NativeAllocation segment, Object block) {
        return refused.get(segment) == block ? refused.remove(segment) : null;
    }

    /** Those whose free was refused, taken out to be freed again, as long as more than {@code keepBytes} of them are left. */
    List<WholeAllocation> takeRefusedBeyond(long keepBytes) {
        long left = 0;
        for (WholeAllocation whole : refused.values()) {
            left += whole.size();
        }
        List<WholeAllocation> taken = new ArrayList<>();
        for (WholeAllocation whole : List.copyOf(refused.values())) {
            if (left <= Math.max(0, keepBytes)) {
                break;
            }
            refused.remove(whole.segment());
            taken.add(whole);
            left -= whole.size();
        }
        return taken;
    }

    /** Those whose free was left unfinished, taken out to be finished. */
    List<WholeAllocation> takeUnfinished() {
        List<WholeAllocation> taken = List.copyOf(unfinished.values());
        unfinished.clear();
        unfinishedBytes = 0;
        return taken;
    }

    long unfinishedBytes() {
        return unfinishedBytes;
    }

    long largestRefused() {
        long largest = 0;
        for (WholeAllocation whole : refused.values()) {
            largest = Math.max(largest, whole.size());
        }
        return largest;
    }

    /** Each refused one as a FREE segment, and each unfinished one as a RELEASING one, where {@code withRefused}. */
    void addSegments(List<MemorySnapshot.Segment> out, boolean withRefused) {
        if (withRefused) {
            for (WholeAllocation whole : refused.values()) {
                out.add(segmentOf(whole, MemorySnapshot.BlockState.FREE));
            }
        }
        for (WholeAllocation whole : unfinished.values()) {
            out.add(segmentOf(whole, MemorySnapshot.BlockState.RELEASING));
        }
    }

    /** An allocation as a segment of one block in {@code state} that no buffer asked for. */
    static MemorySnapshot.Segment segmentOf(WholeAllocation whole, MemorySnapshot.BlockState state) {
        return new MemorySnapshot.Segment(whole.segment().address(), whole.size(), false,
                List.of(new MemorySnapshot.Block(0, whole.size(), state, 0, null)));
    }
}
