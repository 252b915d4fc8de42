package dev.compute.memory.testing;

import dev.compute.memory.resource.Block;
import dev.compute.memory.resource.MemoryResource;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;

/** An adaptor (a manager's {@code resourceAdaptor}) that passes everything through; tests override what they break. */
public class ForwardingResource implements MemoryResource {

    protected final MemoryResource upstream;

    public ForwardingResource(MemoryResource upstream) {
        this.upstream = upstream;
    }

    /**
     * Passes everything through, but throws what {@code refusal} gives for a block from its free, after giving the block
     * back (a free the application's adaptor refuses); nothing where it gives null. Asked before the free, while the
     * block is still the one freed (the pool recycles it after). A checked exception is thrown as it is, past the
     * compiler, as an adaptor written in Kotlin may.
     */
    public static ForwardingResource refusingFrees(MemoryResource upstream, Function<Block, @Nullable Throwable> refusal) {
        return new ForwardingResource(upstream) {
            @Override
            public void deallocate(Block block, CompletableFuture<?> inFlight) {
                Throwable refused = refusal.apply(block);
                upstream.deallocate(block, inFlight);
                if (refused != null) {
                    throw ForwardingResource.<RuntimeException>sneaky(refused);
                }
            }
        };
    }

    @SuppressWarnings("unchecked") // a checked exception passes as unchecked: what the compiler does not see
    private static <T extends Throwable> T sneaky(Throwable failure) throws T {
        throw (T) failure;
    }

    @Override
    public Block allocate(long bytes) {
        return upstream.allocate(bytes);
    }

    @Override
    public @Nullable List<Block> allocateAdjacent(long[] bytes) {
        return upstream.allocateAdjacent(bytes);
    }

    @Override
    public void deallocate(Block block, CompletableFuture<?> inFlight) {
        upstream.deallocate(block, inFlight);
    }

    @Override
    public void close() {
        upstream.close();
    }
}
