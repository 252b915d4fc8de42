package dev.compute.memory.spi;

import dev.compute.memory.BackendInfo;
import dev.compute.memory.DeviceMemoryInfo;
import dev.compute.memory.MemoryLocation;
import java.lang.foreign.MemorySegment;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;

/**
 * Raw memory and transfers on one device. Every method may be called from any thread. The pool above it
 * makes as few {@link #allocate}/{@link #free} calls as it can: they are the expensive ones.
 *
 * <p>Copies take (allocation, offset) pairs and a length; the manager has bounds-checked them. Copies from
 * or to a {@link MemorySegment} accept heap segments (Java arrays) as well as native ones.
 */
public interface ComputeBackend extends AutoCloseable {

    BackendInfo info();

    DeviceMemoryInfo memoryInfo();

    /** {@code DEVICE} on an accelerator, {@code HOST} on the CPU. */
    MemoryLocation defaultLocation();

    /** Whether this backend can allocate at a location and, if not, why. */
    BackendAvailability supports(MemoryLocation location);

    /** True when memory at this location is directly readable and writable by the host: one copy, no syncs. */
    boolean hostAccessible(MemoryLocation location);

    /** A fresh allocation; throws {@link BackendOutOfMemoryException} when there is no memory for it. */
    NativeAllocation allocate(MemoryLocation location, long sizeBytes);

    void free(NativeAllocation allocation);

    /** Page mapping for expandable segments at this location, if the backend can. */
    default Optional<VirtualMemory> virtualMemory(MemoryLocation location) {
        return Optional.empty();
    }

    /** Host memory → an allocation. */
    void copyToDevice(MemorySegment source, NativeAllocation target, long targetOffset, long bytes);

    /** An allocation → host memory. */
    void copyToHost(NativeAllocation source, long sourceOffset, MemorySegment target, long bytes);

    /** Allocation → allocation, both on this device. */
    void copyWithinDevice(NativeAllocation source, long sourceOffset, NativeAllocation target, long targetOffset, long bytes);

    /**
     * As {@link #copyToDevice}, completing when the bytes have landed; {@code source} must stay valid until then.
     * Backends without a copy engine copy on the caller's thread (a confined segment stays usable) and return
     * a completed future.
     */
    default CompletableFuture<Void> copyToDeviceAsync(MemorySegment source, NativeAllocation target, long targetOffset, long bytes) {
        copyToDevice(source, target, targetOffset, bytes);
        return CompletableFuture.completedFuture(null);
    }

    /** As {@link #copyToHost}, completing when the bytes have landed; the default copies on the caller's thread. */
    default CompletableFuture<Void> copyToHostAsync(NativeAllocation source, long sourceOffset, MemorySegment target, long bytes) {
        copyToHost(source, sourceOffset, target, bytes);
        return CompletableFuture.completedFuture(null);
    }

    KernelOps ops();

    /** Frees what the backend itself holds (contexts, queues, staging buffers). The pool has freed its segments first. */
    @Override
    void close();
}
