package dev.compute.memory.resource;

import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.jspecify.annotations.Nullable;

/**
 * An adaptor that passes every call upstream and is told of each block the upstream handed out and of each given back
 * (before it goes upstream, where it may be lent again at once), as RMM's statistics and logging adaptors are. What it
 * does with them is the subclass's; it costs the upstream nothing.
 */
public abstract class ObservingResource implements MemoryResource {

    private final MemoryResource upstream;

    protected ObservingResource(MemoryResource upstream) {
        this.upstream = upstream;
    }

    /** A block the upstream handed out. */
    protected abstract void allocated(Block block);

    /** A block about to go back upstream. */
    protected abstract void freeing(Block block);

    @Override
    public final Block allocate(long bytes) {
        Block block = upstream.allocate(bytes);
        allocated(block);
        return block;
    }

    @Override
    public final @Nullable List<Block> allocateAdjacent(long[] bytes) {
        List<Block> blocks = upstream.allocateAdjacent(bytes);
        if (blocks != null) {
            for (Block block : blocks) {
                allocated(block);
            }
        }
        return blocks;
    }

    @Override
    public final void deallocate(Block block, CompletableFuture<?> inFlight) {
        freeing(block);
        upstream.deallocate(block, inFlight);
    }

    @Override
    public void close() {
        upstream.close();
    }
}
