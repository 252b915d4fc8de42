package dev.compute.memory;

import dev.compute.memory.internal.ManagerLog;
import dev.compute.memory.resource.Block;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

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

    private static final System.Logger LOG = ManagerLog.logger();

    /** The figures of one budget. */
    public record Statistics(String name, long limitBytes, long allocatedBytes, long allocatedBytesPeak, long liveBuffers,
                             long allocations, long refusals) {}

    private final PooledMemoryManager manager;
    private final String name;
    private final long limitBytes;
    // guarded by this: every figure changes with the others, so that a reading is always one state of the budget
    /** The buffers allocated through this budget whose memory is not back, by block. */
    private final Map<Block, UnifiedBuffer> open = new HashMap<>();
    /** Bytes of buffers allocated and not yet back: what the figures say. */
    private long allocated;
    /** Bytes of requests under way in the pool: counted against the limit, not in the figures. */
    private long pending;
    /** The threads whose requests are under way, for the wait in {@link #reserve}. */
    private final List<Thread> requesting = new ArrayList<>();
    private long peak;
    private long allocations;
    private long refusals;
    private boolean closed;

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
        if (count <= 0) {
            throw new IllegalArgumentException("element count must be positive: " + count);
        }
        long bytes = type.bytesFor(count);
        reserve(location, bytes);
        UnifiedBuffer buffer;
        try {
            buffer = manager.allocate(type, count, location);
        } catch (Throwable e) {
            unreserve(bytes);
            throw e;
        }
        if (!settle(buffer, bytes)) {
            buffer.close();
            throw new IllegalStateException("memory budget '" + name + "' was closed while the allocation was under way");
        }
        return buffer;
    }

    /**
     * Counts a request against the limit before it goes to the pool, so that threads allocating at once never pass it
     * together. A request that fits beside what is allocated but not beside requests still under way waits for them
     * (they end within the pool's own bounded waits), so that it is refused only for memory the budget really holds;
     * it does not wait for its own thread's (an out-of-memory handler allocating through the budget).
     */
    private synchronized void reserve(MemoryLocation location, long bytes) {
        long waitUntil = System.nanoTime() + manager.deviceWaitTimeout().toNanos();
        while (true) {
            if (closed) {
                throw new IllegalStateException("memory budget '" + name + "' is closed");
            }
            if (fits(allocated + pending, bytes)) {
                pending += bytes;
                requesting.add(Thread.currentThread());
                return;
            }
            long left = waitUntil - System.nanoTime();
            if (!fits(allocated, bytes) || pending == 0 || requesting.contains(Thread.currentThread()) || left <= 0) {
                refusals++;
                throw new DeviceOutOfMemoryException(location, bytes, OutOfMemoryReason.ADAPTOR_LIMIT, "out of " + location
                        + " memory: requested " + bytes + " bytes with " + allocated + " bytes allocated"
                        + (pending == 0 ? "" : " and " + pending + " bytes being allocated") + " would pass the limit of "
                        + limitBytes + " bytes of memory budget '" + name + "'");
            }
            try {
                wait(Math.max(1, left / 1_000_000));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                refusals++;
                throw new DeviceOutOfMemoryException(location, bytes, OutOfMemoryReason.ADAPTOR_LIMIT, "interrupted while memory budget '"
                        + name + "' waited for requests under way to see whether " + bytes + " bytes fit its limit");
            }
        }
    }

    private boolean fits(long counted, long bytes) {
        return bytes <= limitBytes - counted;
    }

    /** A reserved request failed in the pool: it counts no more. */
    private synchronized void unreserve(long bytes) {
        pending -= bytes;
        requesting.remove(Thread.currentThread());
        notifyAll();
    }

    /**
     * A reserved request got its buffer: counted from now, the buffer and its bytes together, until its memory goes
     * back. False when the budget closed meanwhile: nothing is counted, and the caller closes the buffer.
     */
    private synchronized boolean settle(UnifiedBuffer buffer, long bytes) {
        unreserve(bytes);
        if (closed) {
            return false;
        }
        Block block = buffer.ownBlock();
        open.put(block, buffer);
        allocated += bytes;
        peak = Math.max(peak, allocated);
        allocations++;
        manager.budgetOwns(block, this);
        return true;
    }

    /** The memory of the buffer over {@code block} went back to the pool: before the pool may lend it again. */
    synchronized void released(Block block) {
        UnifiedBuffer buffer = open.remove(block);
        if (buffer != null) {
            allocated -= buffer.byteSize();
        }
    }

    public synchronized Statistics statistics() {
        return new Statistics(name, limitBytes, allocated, peak, open.size(), allocations, refusals);
    }

    public synchronized boolean isClosed() {
        return closed;
    }

    /**
     * Refuses further allocations, then closes every buffer still open through this budget, saying in the log how
     * many and how large (a request scope that forgot a buffer shows here). A buffer closed already whose memory waits
     * for a view is not reported: it was closed. Closing twice is harmless.
     */
    @Override
    public void close() {
        List<UnifiedBuffer> left;
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
            notifyAll();
            left = open.values().stream().filter(buffer -> !buffer.isClosed()).toList();
        }
        if (!left.isEmpty()) {
            long bytes = left.stream().mapToLong(UnifiedBuffer::byteSize).sum();
            LOG.log(System.Logger.Level.WARNING, "memory budget '" + name + "' closed with " + left.size() + " buffer(s) of "
                    + bytes + " bytes still open; closing them now");
        }
        left.forEach(UnifiedBuffer::close);
        manager.budgetClosed(this);
    }

    /**
     * The manager closed: its buffers are closed with it. Where it freed its pools ({@code memoryBack}), their memory
     * went back with everything, so nothing counts any more; where it kept them, what the buffers held stays counted.
     */
    synchronized void managerClosed(boolean memoryBack) {
        closed = true;
        notifyAll();
        if (memoryBack) {
            allocated = 0;
            open.clear();
        }
    }

    @Override
    public String toString() {
        return "MemoryBudget[" + name + ", " + statistics().allocatedBytes() + " of " + limitBytes + " bytes]";
    }
}
