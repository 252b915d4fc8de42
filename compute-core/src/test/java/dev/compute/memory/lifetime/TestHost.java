package dev.compute.memory.lifetime;

import dev.compute.memory.DataType;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.resource.Block;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import dev.compute.memory.spi.ComputeBackend;
import dev.compute.memory.spi.NativeAllocation;
import java.time.Duration;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.jspecify.annotations.Nullable;

/**
 * The manager as a buffer's parts see it ({@link BufferHost}), for their own tests: a real backend (the simulated
 * discrete device unless another is given), blocks straight from it, a real {@link ScopeRegistry}, and books of what
 * the parts asked of their host: calls counted in and out, transfers, mirrors, device-idle waits and every release.
 * A released block is freed on the backend once its device work is done, so a use after that fails loudly.
 */
final class TestHost implements BufferHost {

    /** A block that is a whole backend allocation, or a range of one. */
    record TestBlock(NativeAllocation segment, long offset, long size, long requestedSize) implements Block {}

    /** What {@link #release} was given. */
    record Released(MemoryLocation location, Block block, @Nullable Block mirror, CompletableFuture<?> inFlight) {}

    final ComputeBackend backend;
    final ScopeRegistry scopes = new ScopeRegistry();
    final List<Released> released = new CopyOnWriteArrayList<>();
    /** Mirrors given back after their buffer's own block (only views of the mirror held them). */
    final List<Block> releasedMirrors = new CopyOnWriteArrayList<>();
    final AtomicInteger callsIn = new AtomicInteger();
    final AtomicInteger callsEntered = new AtomicInteger();
    final AtomicInteger endsEntered = new AtomicInteger();
    final AtomicInteger mirrors = new AtomicInteger();
    final AtomicInteger deviceIdleWaits = new AtomicInteger();
    private final Map<Transfer, AtomicLong> transfers = new EnumMap<>(Transfer.class);
    volatile boolean closed;
    volatile Duration deviceWaitTimeout = Duration.ofSeconds(10);

    TestHost() {
        this(new SimulatedDiscreteBackend());
    }

    TestHost(ComputeBackend backend) {
        this.backend = backend;
        for (Transfer transfer : Transfer.values()) {
            transfers.put(transfer, new AtomicLong());
        }
    }

    /** A whole backend allocation of {@code bytes} at {@code location}, as a block. */
    Block block(MemoryLocation location, long bytes) {
        return new TestBlock(backend.allocate(location, bytes), 0, bytes, bytes);
    }

    /** A root buffer of {@code count} elements at {@code location}. */
    BufferCore buffer(MemoryLocation location, DataType type, long count) {
        long bytes = type.bytesFor(count);
        return BufferCore.of(this, location, type, bytes, block(location, bytes));
    }

    /** Whether nothing holds {@code root} now ({@link BufferCore#unheld}), read under its monitor as the manager reads it. */
    static boolean unheld(BufferCore root) {
        synchronized (root) {
            return root.unheld();
        }
    }

    long transferred(Transfer transfer) {
        return transfers.get(transfer).get();
    }

    // ---- BufferHost ---------------------------------------------------------------------------------------------

    @Override
    public int enter(BufferCore buffer) {
        scopes.endHandedOver();
        if (closed) {
            throw new IllegalStateException(buffer.closedByManager());
        }
        callsEntered.incrementAndGet();
        callsIn.incrementAndGet();
        return 1;
    }

    @Override
    public int enterToEnd() {
        endsEntered.incrementAndGet();
        callsIn.incrementAndGet();
        return 2;
    }

    @Override
    public void exit(int call) {
        callsIn.decrementAndGet();
    }

    @Override
    public boolean isClosed() {
        return closed;
    }

    @Override
    public ComputeBackend backend() {
        return backend;
    }

    @Override
    public boolean hostAccessible(MemoryLocation location) {
        return backend.hostAccessible(location);
    }

    @Override
    public void count(Transfer transfer, MemoryLocation location, long bytes) {
        transfers.get(transfer).addAndGet(bytes);
    }

    @Override
    public ScopeRegistry scopes() {
        return scopes;
    }

    @Override
    public Duration deviceWaitTimeout() {
        return deviceWaitTimeout;
    }

    @Override
    public void awaitDeviceIdle() {
        deviceIdleWaits.incrementAndGet();
    }

    @Override
    public Block allocateMirror(long bytes) {
        mirrors.incrementAndGet();
        return block(MemoryLocation.HOST, bytes);
    }

    /** Blocks of closed buffers whose memory waits for views other threads hold, in the order they were held. */
    final List<Block> held = new CopyOnWriteArrayList<>();

    @Override
    public void held(BufferCore buffer, Block block, @Nullable Block mirror) {
        held.add(block);
    }

    @Override
    public void release(MemoryLocation location, Block block, @Nullable Block mirror, CompletableFuture<?> inFlight,
                        @Nullable Object budgetCount) {
        released.add(new Released(location, block, mirror, inFlight));
        inFlight.whenComplete((result, failure) -> {
            backend.free(block.segment());
            if (mirror != null) {
                backend.free(mirror.segment());
            }
        });
    }

    @Override
    public void heldMirrorOnly(BufferCore buffer, Block block, Block mirror) {
        held.add(mirror);
    }

    @Override
    public void releaseMirror(Block mirror, CompletableFuture<?> inFlight) {
        releasedMirrors.add(mirror);
        inFlight.whenComplete((result, failure) -> backend.free(mirror.segment()));
    }
}
