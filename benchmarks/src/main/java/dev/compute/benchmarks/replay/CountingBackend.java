package dev.compute.benchmarks.replay;

import dev.compute.memory.AccessMode;
import dev.compute.memory.BackendInfo;
import dev.compute.memory.DeviceMemoryInfo;
import dev.compute.memory.KernelSource;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.spi.BackendAvailability;
import dev.compute.memory.spi.ComputeBackend;
import dev.compute.memory.spi.DeviceHandle;
import dev.compute.memory.spi.KernelOps;
import dev.compute.memory.spi.NativeAllocation;
import dev.compute.memory.spi.NativeDevice;
import dev.compute.memory.spi.NativeKernel;
import dev.compute.memory.spi.VirtualMemory;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicLong;
import org.jspecify.annotations.Nullable;

/**
 * Counts the calls that get or give back memory on any backend (allocations, frees, range reservations and
 * releases, page maps and unmaps), refused ones included: what each costs on a real device is the reason to
 * make few. Apart, the calls that back memory ({@link #maps}: allocations and page maps) and those that give it back
 * ({@link #unmaps}: frees and page unmaps), without the reservations and releases of address ranges, which back
 * nothing: what PyTorch's {@code num_device_alloc} counts on its side. Everything else passes straight through,
 * the methods the SPI gives a default included, so that the replay runs on the backend's own bounds, waits and close.
 * Thread-safe as the backend it wraps.
 */
final class CountingBackend implements ComputeBackend {

    private final ComputeBackend backend;
    private final AtomicLong calls = new AtomicLong();
    private final AtomicLong maps = new AtomicLong();
    private final AtomicLong unmaps = new AtomicLong();

    CountingBackend(ComputeBackend backend) {
        this.backend = backend;
    }

    long memoryCalls() {
        return calls.get();
    }

    /** Segment allocations and page maps. */
    long maps() {
        return maps.get();
    }

    /** Segment frees and page unmaps. */
    long unmaps() {
        return unmaps.get();
    }

    @Override
    public NativeAllocation allocate(MemoryLocation location, long sizeBytes) {
        calls.incrementAndGet();
        maps.incrementAndGet();
        return backend.allocate(location, sizeBytes);
    }

    @Override
    public void free(NativeAllocation allocation) {
        calls.incrementAndGet();
        unmaps.incrementAndGet();
        backend.free(allocation);
    }

    @Override
    public long maxAllocationBytes(MemoryLocation location) {
        return backend.maxAllocationBytes(location);
    }

    @Override
    public long discardPages(NativeAllocation allocation, long offset, long bytes) {
        return backend.discardPages(allocation, offset, bytes);
    }

    @Override
    public Optional<VirtualMemory> virtualMemory(MemoryLocation location) {
        return backend.virtualMemory(location).map(pages -> new VirtualMemory() {
            @Override
            public long granularity() {
                return pages.granularity();
            }

            @Override
            public NativeAllocation reserve(long sizeBytes) {
                calls.incrementAndGet();
                return pages.reserve(sizeBytes);
            }

            @Override
            public void map(NativeAllocation range, long offset, long length) {
                calls.incrementAndGet();
                maps.incrementAndGet();
                pages.map(range, offset, length);
            }

            @Override
            public void unmap(NativeAllocation range, long offset, long length) {
                calls.incrementAndGet();
                unmaps.incrementAndGet();
                pages.unmap(range, offset, length);
            }

            @Override
            public void release(NativeAllocation range) {
                calls.incrementAndGet();
                pages.release(range);
            }
        });
    }

    @Override
    public BackendInfo info() {
        return backend.info();
    }

    @Override
    public DeviceMemoryInfo memoryInfo() {
        return backend.memoryInfo();
    }

    @Override
    public MemoryLocation defaultLocation() {
        return backend.defaultLocation();
    }

    @Override
    public BackendAvailability supports(MemoryLocation location) {
        return backend.supports(location);
    }

    @Override
    public boolean hostAccessible(MemoryLocation location) {
        return backend.hostAccessible(location);
    }

    @Override
    public void copyToDevice(MemorySegment source, NativeAllocation target, long targetOffset, long bytes) {
        backend.copyToDevice(source, target, targetOffset, bytes);
    }

    @Override
    public void copyToHost(NativeAllocation source, long sourceOffset, MemorySegment target, long bytes) {
        backend.copyToHost(source, sourceOffset, target, bytes);
    }

    @Override
    public void copyWithinDevice(NativeAllocation source, long sourceOffset, NativeAllocation target, long targetOffset, long bytes) {
        backend.copyWithinDevice(source, sourceOffset, target, targetOffset, bytes);
    }

    @Override
    public CompletableFuture<Void> copyToDeviceAsync(MemorySegment source, NativeAllocation target, long targetOffset, long bytes) {
        return backend.copyToDeviceAsync(source, target, targetOffset, bytes);
    }

    @Override
    public CompletableFuture<Void> copyToHostAsync(NativeAllocation source, long sourceOffset, MemorySegment target, long bytes) {
        return backend.copyToHostAsync(source, sourceOffset, target, bytes);
    }

    @Override
    public KernelOps ops() {
        return backend.ops();
    }

    @Override
    public boolean orderAfter(CompletableFuture<?> work) {
        return backend.orderAfter(work);
    }

    @Override
    public boolean supersedes(CompletableFuture<?> later, CompletableFuture<?> earlier) {
        return backend.supersedes(later, earlier);
    }

    @Override
    public DeviceHandle openDeviceHandle(NativeAllocation allocation, long offset, long bytes, AccessMode mode) {
        return backend.openDeviceHandle(allocation, offset, bytes, mode);
    }

    @Override
    public Set<KernelSource.Language> kernelLanguages() {
        return backend.kernelLanguages();
    }

    @Override
    public NativeKernel compileKernel(KernelSource source) {
        return backend.compileKernel(source);
    }

    @Override
    public @Nullable NativeDevice nativeDevice() {
        return backend.nativeDevice();
    }

    @Override
    public boolean awaitIdle(Duration timeout) {
        return backend.awaitIdle(timeout);
    }

    @Override
    public void close() {
        backend.close();
    }

    @Override
    public void close(Duration deviceWait) {
        backend.close(deviceWait);
    }
}
