package dev.compute.memory.recording;

import dev.compute.memory.MemoryLocation;
import dev.compute.memory.resource.Block;
import dev.compute.memory.resource.MemoryResource;
import dev.compute.memory.resource.ObservingResource;

/**
 * Tells an {@link AllocationRecorder} of every allocation and free that passes, as RMM's logging adaptor logs them.
 * The manager puts one at the top of each location's chain (unless {@code compute.memory.recording.enabled=false}),
 * where it sees what callers asked for. An allocation is told once the upstream has handed the block out, a free
 * before the block goes back; while nothing is recording each costs one volatile read. A free the upstream then
 * refuses (a block given back twice) is in the trace all the same, as a free of an id no allocation has.
 * Thread-safe.
 */
public final class RecordingResource extends ObservingResource {

    private final MemoryLocation location;
    private final AllocationRecorder recorder;

    public RecordingResource(MemoryResource upstream, MemoryLocation location, AllocationRecorder recorder) {
        super(upstream);
        this.location = location;
        this.recorder = recorder;
    }

    @Override
    protected void allocated(Block block) {
        recorder.allocated(location, block);
    }

    @Override
    protected void freeing(Block block) {
        recorder.freed(location, block);
    }
}
