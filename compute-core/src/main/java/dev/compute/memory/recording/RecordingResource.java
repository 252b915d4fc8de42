package dev.compute.memory.recording;

import dev.compute.memory.MemoryLocation;
import dev.compute.memory.resource.Block;
import dev.compute.memory.resource.MemoryResource;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.jspecify.annotations.Nullable;

/**
 * Tells an {@link AllocationRecorder} of every allocation and free that passes, as RMM's logging adaptor logs them.
 * The manager puts one at the top of each location's chain (unless {@code compute.memory.recording.enabled=false}),
 * where it sees what callers asked for. An allocation is told once the upstream has handed the block out, a free
 * before the block goes back; while nothing is recording each costs one volatile read. A free the upstream then
 * refuses (a block given back twice) is in the trace all the same, as a free of an id no allocation has.
 * Thread-safe.
 */
public final class RecordingResource implements MemoryResource {

    private final MemoryResource upstream;
    private final MemoryLocation location;
    private final AllocationRecorder recorder;

    public RecordingResource(MemoryResource upstream, MemoryLocation location, AllocationRecorder recorder) {
        this.upstream = upstream;
        this.location = location;
        this.recorder = recorder;
    }

    @Override
    public Block allocate(long bytes) {
        Block block = upstream.allocate(bytes);
        recorder.allocated(location, block);
        return block;
    }

    @Override
    public @Nullable List<Block> allocateAdjacent(long[] bytes) {
        List<Block> blocks = upstream.allocateAdjacent(bytes);
        if (blocks != null) {
            for (Block block : blocks) {
                recorder.allocated(location, block);
            }
        }
        return blocks;
    }

    @Override
    public void deallocate(Block block, CompletableFuture<?> inFlight) {
        recorder.freed(location, block);
        upstream.deallocate(block, inFlight);
    }

    @Override
    public void close() {
        upstream.close();
    }
}
