package dev.compute.memory;

import dev.compute.memory.resource.Block;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A tenant's share of a manager, as Arrow's child allocators: buffers allocated through it come from the manager's
 * pool (no memory of its own, no second cache) but count against its own limit and in its own figures. Made by
 * {@link UnifiedMemoryManager#budget(String, long)}; in Spring, one per bean or per request scope (its
 * {@link #close()} is the bean's destroy method).
 *
 * <p>What counts: the bytes each buffer asked for, from its allocation until its memory goes back to the pool (after
 * {@code close()}, once views and device work on it have ended). An allocation that would pass the limit fails with
 * {@link DeviceOutOfMemoryException} ({@link OutOfMemoryReason#ADAPTOR_LIMIT}) naming the budget, and takes nothing
 * from the pool. The budget holds its buffers until they are closed, so a buffer dropped without {@code close()} is
 * found when the budget closes (not by the leak detector): {@link #close()} reports and closes every buffer still open.
 * Thread-safe.
 */
public final class MemoryBudget implements AutoCloseable {

    private static final System.Logger LOG = System.getLogger(UnifiedMemoryManager.class.getName());

    /** The figures of one budget. */
    public record Statistics(String name, long limitBytes, long allocatedBytes, long allocatedBytesPeak, long liveBuffers,
                             long allocations, long refusals) {}

    private final PooledMemoryManager manager;
    private final String name;
    private final long limitBytes;
    private final Map<Block, UnifiedBuffer> open = new ConcurrentHashMap<>();
    private final AtomicLong allocated = new AtomicLong();
    private final AtomicLong peak = new AtomicLong();
    private final AtomicLong allocations = new AtomicLong();
    private final AtomicLong refusals = new AtomicLong();
    private volatile boolean closed;

    MemoryBudget(PooledMemoryManager manager, String name, long limitBytes) {
        this.manager = manager;
        this.name = name;
        this.limitBytes = limitBytes;
    }

    public String name() {
        return name;
    }

    public long limitBytes() {
        return limitBytes;
    }

    /** {@code bytes} bytes at the manager's default location. */
    public UnifiedBuffer allocate(long bytes) {
        return allocate(bytes, manager.defaultLocation());
    }

    public UnifiedBuffer allocate(long bytes, MemoryLocation location) {
        return allocate(DataType.INT8, bytes, location);
    }

    /** {@code count} elements of {@code type} at the manager's default location. */
    public UnifiedBuffer allocate(DataType type, long count) {
        return allocate(type, count, manager.defaultLocation());
    }

    public UnifiedBuffer allocate(DataType type, long count, MemoryLocation location) {
        if (closed) {
            throw new IllegalStateException("memory budget '" + name + "' is closed");
        }
        if (count <= 0) {
            throw new IllegalArgumentException("element count must be positive: " + count);
        }
        long bytes = type.bytesFor(count);
        long after = allocated.addAndGet(bytes);
        if (after > limitBytes || after < 0) {
            allocated.addAndGet(-bytes);
            refusals.incrementAndGet();
            throw new DeviceOutOfMemoryException(location, bytes, OutOfMemoryReason.ADAPTOR_LIMIT, "out of " + location
                    + " memory: requested " + bytes + " bytes with " + (after - bytes) + " bytes allocated would pass the limit of "
                    + limitBytes + " bytes of memory budget '" + name + "'");
        }
        UnifiedBuffer buffer;
        try {
            buffer = manager.allocateFor(this, type, count, location);
        } catch (RuntimeException e) {
            allocated.addAndGet(-bytes);
            throw e;
        }
        peak.accumulateAndGet(after, Math::max);
        allocations.incrementAndGet();
        return buffer;
    }

    /** A buffer of this budget was made over {@code block}. */
    void opened(Block block, UnifiedBuffer buffer) {
        open.put(block, buffer);
    }

    /** The memory of the buffer over {@code block} went back to the pool. */
    void released(Block block) {
        UnifiedBuffer buffer = open.remove(block);
        if (buffer != null) {
            allocated.addAndGet(-buffer.byteSize());
        }
    }

    public Statistics statistics() {
        return new Statistics(name, limitBytes, allocated.get(), peak.get(), open.size(), allocations.get(), refusals.get());
    }

    public boolean isClosed() {
        return closed;
    }

    /**
     * Refuses further allocations, then closes every buffer still open through this budget, saying in the log how
     * many and how large (a request scope that forgot a buffer shows here). Closing twice is harmless.
     */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        List<UnifiedBuffer> left = List.copyOf(open.values());
        if (!left.isEmpty()) {
            long bytes = left.stream().mapToLong(UnifiedBuffer::byteSize).sum();
            LOG.log(System.Logger.Level.WARNING, "memory budget '" + name + "' closed with " + left.size() + " buffer(s) of "
                    + bytes + " bytes still open; closing them now");
        }
        left.forEach(UnifiedBuffer::close);
        manager.budgetClosed(this);
    }

    @Override
    public String toString() {
        return "MemoryBudget[" + name + ", " + allocated.get() + " of " + limitBytes + " bytes]";
    }
}
