package dev.compute.memory.simulated;

import dev.compute.memory.AccessMode;
import dev.compute.memory.BackendInfo;
import dev.compute.memory.DataType;
import dev.compute.memory.DeviceMemoryInfo;
import dev.compute.memory.KernelSource;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.internal.HostPages;
import dev.compute.memory.spi.BackendAvailability;
import dev.compute.memory.spi.BackendOutOfMemoryException;
import dev.compute.memory.spi.ComputeBackend;
import dev.compute.memory.spi.DeviceHandle;
import dev.compute.memory.spi.JavaKernels;
import dev.compute.memory.spi.KernelArgument;
import dev.compute.memory.spi.KernelOps;
import dev.compute.memory.spi.NativeAllocation;
import dev.compute.memory.spi.NativeKernel;
import dev.compute.memory.spi.Region;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A discrete device in software, for tests of code that must work on a GPU without one: {@code DEVICE} memory
 * the host cannot address (its allocations carry no host segment, so the manager copies and syncs as it does on
 * a GPU), and host-addressable {@code HOST}, {@code PINNED} and {@code UNIFIED} memory. It counts every copy per
 * direction and every allocation, so a test sees exactly what a buffer's state machine made the backend do
 * (the manager's {@link dev.compute.memory.MemoryStatistics} count the bytes as well). Device capacity is
 * limited, so out-of-memory paths can be driven. Ops run in Java on the calling thread; nothing is fast. FLOAT32 is
 * computed in float with {@code alpha} rounded to float, as every real backend's kernels compute it. One's own
 * kernels are {@link KernelSource.Language#JAVA} kernels, run on the launching thread over the device copy's bytes
 * (the host copy is synced to it first, as on a GPU); the work a launch leaves in flight is what {@link #queueWork}
 * says, as for any device access.
 *
 * <p>Give it to a manager directly ({@code UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend())})
 * or, in a Spring test with {@code compute-spring-boot-test} on the class path, by name
 * ({@code compute.backend: simulated}); {@code auto} never chooses it. Thread-safe. Freed memory is unmapped at
 * once (its arena closed), so a use after free fails loudly here rather than reading another buffer's bytes.
 */
public final class SimulatedDiscreteBackend implements ComputeBackend {

    /** The device capacity of {@link #SimulatedDiscreteBackend()}: 1 GiB. */
    public static final long DEFAULT_DEVICE_CAPACITY = 1L << 30;

    private record Memory(Arena arena, MemorySegment segment) {}

    private final long deviceCapacity;
    private final Map<Long, Memory> memory = new ConcurrentHashMap<>();
    private final AtomicLong deviceUsed = new AtomicLong();
    private final AtomicLong hostToDeviceCopies = new AtomicLong();
    private final AtomicLong deviceToHostCopies = new AtomicLong();
    private final AtomicLong deviceToDeviceCopies = new AtomicLong();
    private final AtomicLong allocations = new AtomicLong();
    private final AtomicLong frees = new AtomicLong();
    private volatile CompletableFuture<Void> queuedWork = CompletableFuture.completedFuture(null);
    private volatile boolean closed;

    /** A device of {@code deviceCapacity} bytes: {@code DEVICE} allocations beyond it fail as a full GPU's do. */
    public SimulatedDiscreteBackend(long deviceCapacity) {
        if (deviceCapacity <= 0) {
            throw new IllegalArgumentException("device capacity must be positive: " + deviceCapacity);
        }
        this.deviceCapacity = deviceCapacity;
    }

    public SimulatedDiscreteBackend() {
        this(DEFAULT_DEVICE_CAPACITY);
    }

    /** Allocations not yet freed, at every location. */
    public int liveAllocations() {
        return memory.size();
    }

    /** Copies from host memory into {@code DEVICE} memory so far. */
    public long hostToDeviceCopies() {
        return hostToDeviceCopies.get();
    }

    /** Copies from {@code DEVICE} memory to host memory so far. */
    public long deviceToHostCopies() {
        return deviceToHostCopies.get();
    }

    /** Copies between two allocations on the device so far. */
    public long deviceToDeviceCopies() {
        return deviceToDeviceCopies.get();
    }

    /** Allocations made so far, at every location. */
    public long allocations() {
        return allocations.get();
    }

    /** Allocations freed so far, at every location. */
    public long frees() {
        return frees.get();
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

    /** HOST memory is {@code malloc}ed: its pages can go back; the simulated device's and pinned memory's do not. */
    @Override
    public long discardPages(NativeAllocation allocation, long offset, long bytes) {
        return allocation.location() == MemoryLocation.HOST ? HostPages.discard(allocation.address() + offset, bytes) : 0;
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

    /**
     * What a device access hands "native code" here ({@code access.handle(SimulatedDeviceHandle.class)}): the
     * allocation's bytes as the device holds them, for a kernel simulated in Java, and the work queued on it.
     */
    public record SimulatedDeviceHandle(MemorySegment bytes, CompletableFuture<Void> work) implements DeviceHandle {
        @Override
        public CompletableFuture<Void> end() {
            return work;
        }
    }

    /**
     * The device work that device accesses opened from now on queue: completed by default; an incomplete future
     * stands for a kernel still running when the access ends, so frees and host reads must wait for it.
     */
    public void queueWork(CompletableFuture<Void> work) {
        queuedWork = work;
    }

    @Override
    public DeviceHandle openDeviceHandle(NativeAllocation allocation, long offset, long bytes, AccessMode mode) {
        return new SimulatedDeviceHandle(deviceMemory(allocation).asSlice(offset, bytes), queuedWork);
    }

    @Override
    public Set<KernelSource.Language> kernelLanguages() {
        return Set.of(KernelSource.Language.JAVA);
    }

    /** A Java kernel over the device copy's bytes: what {@link SimulatedDeviceHandle#bytes()} gives native code. */
    @Override
    public NativeKernel compileKernel(KernelSource source) {
        if (source.language() != KernelSource.Language.JAVA) {
            throw new UnsupportedOperationException("the simulated device runs Java kernels, not " + source);
        }
        return JavaKernels.compile(source, SimulatedDiscreteBackend::deviceBytes);
    }

    private static MemorySegment deviceBytes(KernelArgument.Buffer buffer) {
        return ((SimulatedDeviceHandle) buffer.handle()).bytes();
    }

    /**
     * The bytes of an allocation as the simulated device holds them: what a native kernel reads and writes. Host
     * memory is read in place, as a device reads host memory it can address: this backend's HOST, PINNED and UNIFIED
     * allocations, and host memory of the manager's own, such as a mapped file's.
     */
    private MemorySegment deviceMemory(NativeAllocation allocation) {
        MemorySegment host = allocation.hostSegment();
        if (host != null) {
            return host;
        }
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
                    set(m, x.type(), i, x.type() == DataType.FLOAT32 ? (float) alpha * (float) get(m, x.type(), i) : alpha * get(m, x.type(), i));
                }
                return CompletableFuture.completedFuture(null);
            }

            @Override
            public CompletableFuture<Void> axpy(double alpha, Region x, Region y) {
                MemorySegment mx = slice(x);
                MemorySegment my = slice(y);
                for (long i = 0; i < x.count(); i++) {
                    set(my, y.type(), i, y.type() == DataType.FLOAT32
                            ? (float) alpha * (float) get(mx, x.type(), i) + (float) get(my, y.type(), i)
                            : alpha * get(mx, x.type(), i) + get(my, y.type(), i));
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
