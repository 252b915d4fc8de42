package dev.compute.memory.testing;

import dev.compute.memory.AccessMode;
import dev.compute.memory.BackendInfo;
import dev.compute.memory.DataType;
import dev.compute.memory.DeviceMemoryInfo;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.spi.BackendAvailability;
import dev.compute.memory.spi.BackendOutOfMemoryException;
import dev.compute.memory.spi.ComputeBackend;
import dev.compute.memory.spi.DeviceHandle;
import dev.compute.memory.spi.KernelOps;
import dev.compute.memory.spi.NativeAllocation;
import dev.compute.memory.spi.Region;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A discrete device in software: DEVICE memory the host cannot address (its allocations carry no host
 * segment, so the manager must copy and sync as on a GPU), and host-addressable HOST, PINNED and UNIFIED
 * memory. Counts every copy per direction and every allocation, so tests can see exactly what a buffer's
 * state machine made the backend do. Device capacity is limited so out-of-memory paths can be driven.
 */
public final class SimulatedDiscreteBackend implements ComputeBackend {

    private final long deviceCapacity;
    private record Memory(Arena arena, MemorySegment segment) {}

    private final Map<Long, Memory> memory = new ConcurrentHashMap<>();
    private final AtomicLong deviceUsed = new AtomicLong();
    public final AtomicLong hostToDeviceCopies = new AtomicLong();
    public final AtomicLong deviceToHostCopies = new AtomicLong();
    public final AtomicLong deviceToDeviceCopies = new AtomicLong();
    public final AtomicLong allocations = new AtomicLong();
    public final AtomicLong frees = new AtomicLong();
    private volatile boolean closed;

    public SimulatedDiscreteBackend(long deviceCapacity) {
        this.deviceCapacity = deviceCapacity;
    }

    public SimulatedDiscreteBackend() {
        this(1L << 30);
    }

    /** Allocations not yet freed, at every location. */
    public int liveAllocations() {
        return memory.size();
    }

    public boolean isClosed() {
        return closed;
    }

    @Override
    public BackendInfo info() {
        return new BackendInfo("simulated", 0, "simulated discrete device", deviceCapacity);
    }

    @Override
    public DeviceMemoryInfo memoryInfo() {
        return new DeviceMemoryInfo(deviceCapacity - deviceUsed.get(), deviceCapacity);
    }

    @Override
    public MemoryLocation defaultLocation() {
        return MemoryLocation.DEVICE;
    }

    @Override
    public BackendAvailability supports(MemoryLocation location) {
        return BackendAvailability.available("simulated " + location);
    }

    @Override
    public boolean hostAccessible(MemoryLocation location) {
        return location != MemoryLocation.DEVICE;
    }

    @Override
    public NativeAllocation allocate(MemoryLocation location, long sizeBytes) {
        if (location == MemoryLocation.DEVICE && deviceUsed.addAndGet(sizeBytes) > deviceCapacity) {
            deviceUsed.addAndGet(-sizeBytes);
            throw new BackendOutOfMemoryException("simulated device full: " + sizeBytes + " bytes requested, "
                    + (deviceCapacity - deviceUsed.get()) + " free");
        }
        Arena arena = Arena.ofShared();
        MemorySegment segment = arena.allocate(sizeBytes, 256);
        memory.put(segment.address(), new Memory(arena, segment));
        allocations.incrementAndGet();
        return new NativeAllocation(location, segment.address(), sizeBytes,
                hostAccessible(location) ? segment : null, null);
    }

    @Override
    public void free(NativeAllocation allocation) {
        Memory freed = memory.remove(allocation.address());
        if (freed == null) {
            throw new IllegalStateException("double free or foreign allocation: " + allocation);
        }
        // closing the arena makes any later use of this memory fail loudly instead of reading freed memory
        freed.arena().close();
        if (allocation.location() == MemoryLocation.DEVICE) {
            deviceUsed.addAndGet(-allocation.sizeBytes());
        }
        frees.incrementAndGet();
    }

    /** What a device access hands native code here: the allocation's bytes, and work the test says is still running. */
    public record SimulatedDeviceHandle(MemorySegment bytes, CompletableFuture<Void> work) implements DeviceHandle {
        @Override
        public CompletableFuture<Void> end() {
            return work;
        }
    }

    /**
     * Device work that a device access queues: completed by default; a test sets an incomplete future to stand for a
     * kernel still running when the access ends.
     */
    public volatile CompletableFuture<Void> queuedWork = CompletableFuture.completedFuture(null);

    @Override
    public DeviceHandle openDeviceHandle(NativeAllocation allocation, long offset, long bytes, AccessMode mode) {
        return new SimulatedDeviceHandle(deviceMemory(allocation).asSlice(offset, bytes), queuedWork);
    }

    /** The bytes of an allocation as the simulated device holds them: what a native kernel reads and writes. */
    public MemorySegment deviceMemory(NativeAllocation allocation) {
        Memory m = memory.get(allocation.address());
        if (m == null) {
            throw new IllegalStateException("use of freed memory: " + allocation);
        }
        return m.segment();
    }

    @Override
    public void copyToDevice(MemorySegment source, NativeAllocation target, long targetOffset, long bytes) {
        MemorySegment.copy(source, 0, deviceMemory(target), targetOffset, bytes);
        hostToDeviceCopies.incrementAndGet();
    }

    @Override
    public void copyToHost(NativeAllocation source, long sourceOffset, MemorySegment target, long bytes) {
        MemorySegment.copy(deviceMemory(source), sourceOffset, target, 0, bytes);
        deviceToHostCopies.incrementAndGet();
    }

    @Override
    public void copyWithinDevice(NativeAllocation source, long sourceOffset, NativeAllocation target, long targetOffset, long bytes) {
        MemorySegment.copy(deviceMemory(source), sourceOffset, deviceMemory(target), targetOffset, bytes);
        deviceToDeviceCopies.incrementAndGet();
    }

    @Override
    public KernelOps ops() {
        return new KernelOps() {
            @Override
            public CompletableFuture<Void> fill(Region target, double value) {
                MemorySegment m = slice(target);
                for (long i = 0; i < target.count(); i++) {
                    set(m, target.type(), i, value);
                }
                return CompletableFuture.completedFuture(null);
            }

            @Override
            public CompletableFuture<Void> scale(Region x, double alpha) {
                MemorySegment m = slice(x);
                for (long i = 0; i < x.count(); i++) {
                    set(m, x.type(), i, alpha * get(m, x.type(), i));
                }
                return CompletableFuture.completedFuture(null);
            }

            @Override
            public CompletableFuture<Void> axpy(double alpha, Region x, Region y) {
                MemorySegment mx = slice(x);
                MemorySegment my = slice(y);
                for (long i = 0; i < x.count(); i++) {
                    set(my, y.type(), i, alpha * get(mx, x.type(), i) + get(my, y.type(), i));
                }
                return CompletableFuture.completedFuture(null);
            }

            @Override
            public CompletableFuture<Double> sum(Region x) {
                MemorySegment m = slice(x);
                double total = 0;
                for (long i = 0; i < x.count(); i++) {
                    total += get(m, x.type(), i);
                }
                return CompletableFuture.completedFuture(total);
            }
        };
    }

    private MemorySegment slice(Region region) {
        return deviceMemory(region.allocation()).asSlice(region.offset(), region.byteSize());
    }

    private static double get(MemorySegment m, DataType type, long i) {
        return type == DataType.FLOAT32 ? m.getAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, i) : m.getAtIndex(ValueLayout.JAVA_DOUBLE_UNALIGNED, i);
    }

    private static void set(MemorySegment m, DataType type, long i, double v) {
        if (type == DataType.FLOAT32) {
            m.setAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, i, (float) v);
        } else {
            m.setAtIndex(ValueLayout.JAVA_DOUBLE_UNALIGNED, i, v);
        }
    }

    @Override
    public void close() {
        closed = true;
    }
}
