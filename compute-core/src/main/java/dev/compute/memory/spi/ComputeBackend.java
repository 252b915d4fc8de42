package dev.compute.memory.spi;

import dev.compute.memory.AccessMode;
import dev.compute.memory.BackendInfo;
import dev.compute.memory.DeviceMemoryInfo;
import dev.compute.memory.KernelSource;
import dev.compute.memory.MemoryLocation;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import org.jspecify.annotations.Nullable;

/**
 * Raw memory and transfers on one device. Every method may be called from any thread. The pool above it
 * makes as few {@link #allocate}/{@link #free} calls as it can: they are the expensive ones.
 *
 * <p>Copies take (allocation, offset) pairs and a length; the manager has bounds-checked them. Copies from
 * or to a {@link MemorySegment} accept heap segments (Java arrays) as well as native ones. A blocking copy whose
 * bounded wait for the device times out after it queued work throws {@link QueuedWorkTimeoutException}, saying when
 * the device is past that work; the manager keeps the memory involved until then.
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

    /**
     * Gives the allocation back. A free that throws leaves it as it was, usable, for a later free to try again; one that
     * throws {@link FreeUnfinishedException} leaves it held but unusable, for a later free to finish.
     */
    void free(NativeAllocation allocation);

    /**
     * The largest single allocation the backend can make at this location, whatever memory is free (OpenCL's
     * {@code CL_DEVICE_MAX_MEM_ALLOC_SIZE}): a larger request fails at once, with no cache released for it. The
     * default has no such limit.
     */
    default long maxAllocationBytes(MemoryLocation location) {
        return Long.MAX_VALUE;
    }

    /** Page mapping for expandable segments at this location, if the backend can. */
    default Optional<VirtualMemory> virtualMemory(MemoryLocation location) {
        return Optional.empty();
    }

    /**
     * Gives the whole pages of {@code bytes} at {@code offset} of {@code allocation} back to the operating system, the
     * range staying the allocation's: a later read of it finds zeros, a later write takes a fresh page, and no byte
     * outside the range changes. The manager asks it for a closed buffer's host memory that views on an idle thread
     * have held past {@code held-memory-warning}, which no pool may lend again until they end. Returns the bytes given
     * back; the default gives none, as a backend must for locked, pinned, device or file-backed memory.
     */
    default long discardPages(NativeAllocation allocation, long offset, long bytes) {
        return 0;
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

    /**
     * Orders the calling thread's next device work (what it queues on the queue or stream this backend hands it, an op
     * of {@link #ops()} included) after {@code work}, on the device, without the host waiting: true when done so, or
     * when there is nothing to do (the work is done, or queued on that same in-order queue or stream); false where the
     * backend cannot (a future it did not make), and the caller then waits for {@code work} on the host. The default,
     * for backends whose work is done when its call returns, orders nothing and is true for completed work only.
     */
    default boolean orderAfter(CompletableFuture<?> work) {
        return work.isDone();
    }

    /**
     * Whether {@code later}, recorded on a buffer after {@code earlier}, completes only after it (work of one in-order
     * queue or stream): the manager then keeps only {@code later} as the buffer's work in flight.
     */
    default boolean supersedes(CompletableFuture<?> later, CompletableFuture<?> earlier) {
        return false;
    }

    /**
     * What native code needs to work on {@code bytes} bytes at {@code offset} of {@code allocation} (a CUDA device
     * pointer and the calling thread's stream, an OpenCL buffer and queue), opened by a device access on the
     * calling thread. The default, for backends whose memory Java reaches directly, has no native objects.
     * Throws {@link IllegalArgumentException} where kernels cannot reach memory at that location.
     */
    default DeviceHandle openDeviceHandle(NativeAllocation allocation, long offset, long bytes, AccessMode mode) {
        return DeviceHandle.NONE;
    }

    /** The languages {@link #compileKernel} takes; none by default. */
    default Set<KernelSource.Language> kernelLanguages() {
        return Set.of();
    }

    /**
     * Compiles one's own kernel for this device, in a language of {@link #kernelLanguages()}. The manager compiles
     * each source once and keeps the kernel until it closes; the backend releases what it compiled in {@link #close()}.
     * Throws {@link dev.compute.memory.KernelCompileException} with the compiler's log where the source does not
     * compile; the default, for a backend that runs no kernels of one's own, throws
     * {@link UnsupportedOperationException} naming the backend.
     */
    default NativeKernel compileKernel(KernelSource source) {
        throw new UnsupportedOperationException("the " + info().backend() + " backend compiles no kernels of one's own ("
                + source + ")");
    }

    /**
     * The device's native objects for code that builds its own work on it (an OpenCL context, device and queue; a
     * CUDA context, device and the calling thread's stream), valid until the backend closes; null for a backend
     * that has none (the CPU).
     */
    default @Nullable NativeDevice nativeDevice() {
        return null;
    }

    /**
     * Waits, at most {@code timeout}, until every command queued so far has finished on the device; true when it
     * has. The manager calls it on close, before it frees memory that running work may still use.
     */
    default boolean awaitIdle(Duration timeout) {
        return true;
    }

    /**
     * Frees what the backend itself holds (contexts, queues, staging buffers). The pool has freed its segments
     * first, except memory the manager had to keep because a thread could still reach it (a view held by another
     * thread past the close timeout): allocations not freed must stay valid after close.
     */
    @Override
    void close();

    /**
     * As {@link #close()}, waiting at most {@code deviceWait} for device work still running, and for the application's
     * actions on the futures it completed, before it keeps what they may use. The manager's close calls it with what is
     * left of its close timeout (a second at least) where it found the device idle, and with zero where it found the
     * device busy past its close timeout. The default ignores the bound.
     */
    default void close(Duration deviceWait) {
        close();
    }
}
