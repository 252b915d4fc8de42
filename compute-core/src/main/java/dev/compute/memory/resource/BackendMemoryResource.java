package dev.compute.memory.resource;

import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemorySnapshot;
import dev.compute.memory.MemoryStatistics;
import dev.compute.memory.spi.BackendOutOfMemoryException;
import dev.compute.memory.spi.ComputeBackend;
import dev.compute.memory.spi.NativeAllocation;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * No pooling: every allocation is a backend call and every free gives the memory straight back (once device
 * work on it has finished). The upstream of last resort, and what {@code pooling.enabled=false} gets.
 * Reserved equals allocated here; nothing is ever cached. Thread-safe.
 */
public final class BackendMemoryResource implements MemoryResource {

    private final ComputeBackend backend;
    private final MemoryLocation location;
    private final Map<NativeAllocation, WholeAllocation> live = new ConcurrentHashMap<>();
    private final AtomicLong reserved = new AtomicLong();
    private final AtomicLong reservedPeak = new AtomicLong();
    private final AtomicLong backendAllocations = new AtomicLong();
    private final AtomicLong backendFrees = new AtomicLong();
    private volatile boolean closed;

    public BackendMemoryResource(ComputeBackend backend, MemoryLocation location) {
        this.backend = backend;
        this.location = location;
    }

    private record WholeAllocation(NativeAllocation segment, long requestedSize) implements Block {
        @Override
        public long offset() {
            return 0;
        }

        @Override
        public long size() {
            return segment.sizeBytes();
        }
    }

    /** Under the lock, so that {@link #close()} (and the backend's close after it) never races a backend call. */
    @Override
    public synchronized Block allocate(long bytes) {
        if (closed) {
            throw new IllegalStateException(location + " memory resource is closed");
        }
        NativeAllocation allocation;
        try {
            allocation = backend.allocate(location, bytes);
        } catch (BackendOutOfMemoryException e) {
            throw new DeviceOutOfMemoryException(location, bytes, "out of " + location + " memory: requested " + bytes
                    + " bytes, " + reserved.get() + " bytes live (pooling is disabled, nothing is cached); device free "
                    + backend.memoryInfo().freeBytes() + " bytes; backend said: " + e.getMessage());
        }
        WholeAllocation block = new WholeAllocation(allocation, bytes);
        live.put(allocation, block);
        backendAllocations.incrementAndGet();
        reservedPeak.accumulateAndGet(reserved.addAndGet(allocation.sizeBytes()), Math::max);
        return block;
    }

    /** The memory goes back once {@code inFlight} completes; whoever removes the entry from {@code live} frees it, once. */
    @Override
    public void deallocate(Block block, CompletableFuture<?> inFlight) {
        if (closed) {
            return;
        }
        if (!(block instanceof WholeAllocation whole) || live.get(whole.segment()) != whole) {
            throw new IllegalArgumentException("this block was not allocated by this resource, or was freed already: " + block);
        }
        if (inFlight.isDone()) {
            freeIfLive(whole.segment());
        } else {
            inFlight.whenComplete((result, error) -> freeIfLive(whole.segment()));
        }
    }

    private void freeIfLive(NativeAllocation segment) {
        WholeAllocation whole = live.remove(segment);
        if (whole != null) {
            backend.free(segment);
            backendFrees.incrementAndGet();
            reserved.addAndGet(-whole.size());
        }
    }

    @Override
    public long trim(long keepBytes) {
        return 0;
    }

    @Override
    public void collectStatistics(MemoryStatistics.Builder into) {
        into.reservedBytes = reserved.get();
        into.reservedBytesPeak = reservedPeak.get();
        into.segments = live.size();
        into.backendAllocations = backendAllocations.get();
        into.backendFrees = backendFrees.get();
        into.poolMisses = backendAllocations.get();
    }

    @Override
    public List<MemorySnapshot.Segment> segments() {
        List<MemorySnapshot.Segment> out = new ArrayList<>();
        for (WholeAllocation b : live.values()) {
            out.add(new MemorySnapshot.Segment(b.segment().address(), b.size(), false,
                    List.of(new MemorySnapshot.Block(0, b.size(), MemorySnapshot.BlockState.LIVE, b.requestedSize(), null))));
        }
        return out;
    }

    @Override
    public synchronized void close() {
        closed = true;
        for (NativeAllocation segment : live.keySet()) {
            freeIfLive(segment);
        }
    }
}
