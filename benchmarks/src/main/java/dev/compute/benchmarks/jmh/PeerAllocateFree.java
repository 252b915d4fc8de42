package dev.compute.benchmarks.jmh;

import dev.compute.memory.MemoryLocation;
import dev.compute.memory.cpu.CpuBackend;
import dev.compute.memory.UnifiedMemoryManagerBuilder;
import dev.compute.memory.MemoryEventListener;
import dev.compute.memory.resource.BackendResource;
import dev.compute.memory.resource.Block;
import dev.compute.memory.resource.MemoryResource;
import dev.compute.memory.resource.PoolSettings;
import dev.compute.memory.resource.pool.CachingPoolResource;
import dev.compute.memory.spi.BackendSettings;
import dev.compute.memory.spi.ComputeBackend;
import dev.compute.memory.spi.NativeAllocation;
import io.netty.buffer.AdaptiveByteBufAllocator;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.PooledByteBufAllocator;
import java.lang.foreign.Arena;
import java.nio.ByteBuffer;
import java.util.Map;
import java.util.function.Function;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.TearDown;

/**
 * The same allocate+free pairs as {@link ManagerAllocateFree}, on what our pool is held against:
 * <ul>
 * <li>{@code backend}: the CPU backend's own {@code allocate}/{@code free} ({@code posix_memalign} and
 *     {@code free} below 256 KiB, {@code mmap} from there up): the raw cost the pool saves.</li>
 * <li>{@code backend-resource}: {@link BackendResource}, the unpooled resource (the backend plus its
 *     bookkeeping), without the manager around it.</li>
 * <li>{@code pool-resource}: {@link CachingPoolResource} alone, with the manager's default settings, without the
 *     manager's chain around it (leak tracking, statistics): what the pool itself costs.</li>
 * <li>{@code netty-pooled}, {@code netty-adaptive}: Netty's {@link PooledByteBufAllocator} and
 *     {@link AdaptiveByteBufAllocator}, direct buffers, with Netty's default leak detection (simple).</li>
 * <li>{@code arena-confined}: {@code Arena.ofConfined().allocate} and closing the arena (zeroes the memory).</li>
 * <li>{@code allocate-direct}: {@code ByteBuffer.allocateDirect} (zeroes the memory); the free happens later,
 *     when the garbage collector finds the buffer unreachable, so its pair includes that deferred cost only in
 *     part.</li>
 * </ul>
 */
public class PeerAllocateFree extends AllocateFreePairs {

    @Param({"backend", "backend-resource", "pool-resource", "netty-pooled", "netty-adaptive", "arena-confined", "allocate-direct"})
    public String allocator;

    private PairAllocator pairs;

    /** One way to allocate and free; one implementation is loaded per JVM, so the call is monomorphic. */
    private interface PairAllocator extends AutoCloseable {
        long pair(long bytes);

        @Override
        default void close() {}
    }

    @Setup(Level.Trial)
    public void open() {
        pairs = switch (allocator) {
            case "backend" -> new RawBackend(cpuBackend());
            case "backend-resource" -> new ResourcePairs(cpuBackend(), PeerAllocateFree::backendResource);
            case "pool-resource" -> new ResourcePairs(cpuBackend(), backend -> new CachingPoolResource(backendResource(backend),
                    PoolSettings.expandable(), MemoryEventListener.NONE));
            case "netty-pooled" -> new NettyPairs(new PooledByteBufAllocator(true));
            case "netty-adaptive" -> new NettyPairs(new AdaptiveByteBufAllocator(true, true));
            case "arena-confined" -> new ArenaPairs();
            case "allocate-direct" -> new DirectBufferPairs();
            default -> throw new IllegalArgumentException("unknown allocator '" + allocator + "'");
        };
    }

    /** The backend's resource with the manager's default cap. */
    private static BackendResource backendResource(ComputeBackend backend) {
        return new BackendResource(backend, MemoryLocation.HOST, UnifiedMemoryManagerBuilder.DEFAULT_MAX_POOL_SIZE,
                "compute.memory.pooling.max-pool-size", PoolSettings.DEFAULT_DEVICE_WAIT_TIMEOUT, MemoryEventListener.NONE);
    }

    @TearDown(Level.Trial)
    public void close() {
        pairs.close();
    }

    @Override
    protected long pair(long bytes) {
        return pairs.pair(bytes);
    }

    /** The CPU backend as the manager opens it by default (pinning on, a 16 MiB staging buffer, no options). */
    private static CpuBackend cpuBackend() {
        return new CpuBackend(new BackendSettings(0, true, 16L << 20, Map.of()));
    }

    private record RawBackend(ComputeBackend backend) implements PairAllocator {
        @Override
        public long pair(long bytes) {
            NativeAllocation allocation = backend.allocate(MemoryLocation.HOST, bytes);
            backend.free(allocation);
            return allocation.address();
        }

        @Override
        public void close() {
            backend.close();
        }
    }

    private static final class ResourcePairs implements PairAllocator {
        private final ComputeBackend backend;
        private final MemoryResource resource;

        ResourcePairs(ComputeBackend backend, Function<ComputeBackend, MemoryResource> resource) {
            this.backend = backend;
            this.resource = resource.apply(backend);
        }

        @Override
        public long pair(long bytes) {
            Block block = resource.allocate(bytes);
            resource.deallocate(block);
            return block.size();
        }

        @Override
        public void close() {
            resource.close();
            backend.close();
        }
    }

    private record NettyPairs(ByteBufAllocator allocator) implements PairAllocator {
        @Override
        public long pair(long bytes) {
            ByteBuf buffer = allocator.directBuffer((int) bytes);
            int capacity = buffer.capacity();
            buffer.release();
            return capacity;
        }
    }

    private static final class ArenaPairs implements PairAllocator {
        @Override
        public long pair(long bytes) {
            try (Arena arena = Arena.ofConfined()) {
                return arena.allocate(bytes).address();
            }
        }
    }

    private static final class DirectBufferPairs implements PairAllocator {
        @Override
        public long pair(long bytes) {
            return ByteBuffer.allocateDirect((int) bytes).capacity();
        }
    }
}
