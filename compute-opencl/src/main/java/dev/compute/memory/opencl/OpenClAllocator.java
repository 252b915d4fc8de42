package dev.compute.memory.opencl;

import static org.jocl.CL.CL_MAP_READ;
import static org.jocl.CL.CL_MAP_WRITE;
import static org.jocl.CL.CL_MEM_ALLOC_HOST_PTR;
import static org.jocl.CL.CL_MEM_READ_WRITE;
import static org.jocl.CL.CL_MEM_SVM_FINE_GRAIN_BUFFER;
import static org.jocl.CL.CL_MEM_USE_HOST_PTR;

import dev.compute.memory.DeviceTimeoutException;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.internal.BytesLedger;
import dev.compute.memory.spi.BackendAvailability;
import dev.compute.memory.spi.BackendOutOfMemoryException;
import dev.compute.memory.spi.FreeUnfinishedException;
import dev.compute.memory.spi.NativeAllocation;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.jocl.CL;
import org.jocl.Pointer;
import org.jocl.cl_buffer_region;
import org.jocl.cl_mem;

/**
 * The backend's memory at its four locations, and the buffers one's own kernels see of it (sub-buffers, host-memory
 * buffers). It keeps what OpenCL does not: an address for each DEVICE buffer, from a range never reused so that
 * allocations never overlap in the pool's view, and a count of the DEVICE bytes held, since OpenCL creates buffers
 * lazily and a device short of memory often grants {@code clCreateBuffer} and fails the buffer's first use instead.
 * See {@link OpenClBackend} for what each location is and what its handle holds.
 */
final class OpenClAllocator {

    private final OpenClDeviceProperties properties;
    private final OpenClQueue queue;
    /** Bytes of DEVICE buffers held, against the device's global memory ({@link #takeDeviceMemory}). */
    private final BytesLedger deviceBytes;
    /**
     * OpenCL buffers have no address: a DEVICE allocation's is taken from this counter, which hands out ranges
     * of the allocation's size that are never reused, so that allocations never overlap in the pool's view.
     */
    private final AtomicLong nextDeviceAddress;
    /** DEVICE, PINNED and UNIFIED allocations not freed: memory a device handle may reach. */
    private final AtomicInteger liveAllocations = new AtomicInteger();
    /** PINNED buffers unmapped by a free whose release was refused: held, out of use, for a later free to release. */
    private final Set<cl_mem> unmappedPinned = ConcurrentHashMap.newKeySet();
    /** The sub-buffers device accesses use, kept from one access to the next. */
    private final SubBuffers keptSubBuffers = new SubBuffers();
    /**
     * Test-only: a code the next release of a buffer by {@link #free} returns instead of releasing it, where not
     * {@code CL_SUCCESS} (a release the implementation refuses, which PoCL never does).
     */
    volatile int failNextReleaseWith = CL.CL_SUCCESS;

    OpenClAllocator(OpenClDeviceProperties properties, OpenClQueue queue) {
        this.properties = properties;
        this.queue = queue;
        this.deviceBytes = new BytesLedger(properties.globalMemory());
        this.nextDeviceAddress = new AtomicLong(properties.alignment());
    }

    /** A fresh allocation of {@code sizeBytes} rounded up to the device's alignment; the backend checked it is open. */
    NativeAllocation allocate(MemoryLocation location, long sizeBytes) {
        if (sizeBytes <= 0) {
            throw new IllegalArgumentException("allocation size must be positive: " + sizeBytes);
        }
        long alignment = properties.alignment();
        long size = Math.ceilDiv(sizeBytes, alignment) * alignment;
        if (location != MemoryLocation.HOST && size > properties.maxAllocation()) {
            throw new BackendOutOfMemoryException(location + " allocation of " + sizeBytes + " bytes is above the largest single "
                    + "allocation of " + properties.device().describe() + ": " + properties.maxAllocation() + " bytes (CL_DEVICE_MAX_MEM_ALLOC_SIZE)");
        }
        NativeAllocation allocation = switch (location) {
            case DEVICE -> allocateDevice(size);
            case PINNED -> allocatePinned(size);
            case HOST -> allocateHost(size);
            case UNIFIED -> allocateUnified(size);
        };
        if (location != MemoryLocation.HOST) {
            liveAllocations.incrementAndGet();
        }
        return allocation;
    }

    /** Whether DEVICE, PINNED or UNIFIED memory is still allocated: what a device handle may reach. */
    boolean holdsMemory() {
        return liveAllocations.get() > 0;
    }

    private NativeAllocation allocateDevice(long size) {
        takeDeviceMemory(size);
        try {
            int[] error = new int[1];
            cl_mem memory = JoclCalls.clCreateBuffer(queue.context(), CL_MEM_READ_WRITE, size, null, error);
            OpenClCalls.check(error[0], "clCreateBuffer of " + size + " bytes");
            return new NativeAllocation(MemoryLocation.DEVICE, nextDeviceAddress.getAndAdd(size), size, null, memory);
        } catch (RuntimeException e) {
            deviceBytes.giveBack(size);
            throw e;
        }
    }

    /**
     * Counts {@code size} bytes of DEVICE buffers, or refuses them where they would take what this backend holds past
     * the device's global memory: OpenCL creates buffers lazily, so a device that has not the memory often grants
     * {@code clCreateBuffer} and fails the buffer's first copy or kernel instead (PoCL grants them all).
     */
    private void takeDeviceMemory(long size) {
        if (!deviceBytes.tryTake(size)) {
            throw new BackendOutOfMemoryException("DEVICE allocation of " + size + " bytes would take the " + deviceBytes.heldBytes()
                    + " bytes of DEVICE buffers this backend holds past the " + properties.globalMemory() + " bytes of "
                    + properties.device().describe() + " (CL_DEVICE_GLOBAL_MEM_SIZE)");
        }
    }

    private NativeAllocation allocatePinned(long size) {
        int[] error = new int[1];
        cl_mem memory = JoclCalls.clCreateBuffer(queue.context(), CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, size, null, error);
        OpenClCalls.check(error[0], "clCreateBuffer(CL_MEM_ALLOC_HOST_PTR) of " + size + " bytes");
        // a new buffer has no work to wait for: mapped on the blocking transfers' queue, which no other work holds up
        ByteBuffer mapping = JoclCalls.clEnqueueMapBuffer(queue.transferQueue(), memory, true, CL_MAP_READ | CL_MAP_WRITE, 0, size, 0, null, null, error);
        if (error[0] != CL.CL_SUCCESS || mapping == null) {
            JoclCalls.clReleaseMemObject(memory);
            OpenClCalls.check(error[0] != CL.CL_SUCCESS ? error[0] : CL.CL_MAP_FAILURE, "clEnqueueMapBuffer of " + size + " pinned bytes");
        }
        long address = OpenClCalls.addressOf(mapping);
        return new NativeAllocation(MemoryLocation.PINNED, address, size, MemorySegment.ofAddress(address).reinterpret(size),
                new OpenClBackend.PinnedBuffer(memory, mapping));
    }

    private NativeAllocation allocateHost(long size) {
        Arena arena = Arena.ofShared();
        try {
            MemorySegment segment = arena.allocate(size, Math.max(properties.alignment(), 64));
            return new NativeAllocation(MemoryLocation.HOST, segment.address(), size, segment, arena);
        } catch (OutOfMemoryError e) {
            arena.close();
            throw new BackendOutOfMemoryException("no host memory for " + size + " bytes", e);
        }
    }

    private NativeAllocation allocateUnified(long size) {
        BackendAvailability support = properties.unifiedSupport();
        if (!support.available()) {
            throw new IllegalStateException(support.detail());
        }
        Pointer svm = JoclCalls.clSVMAlloc(queue.context(), CL_MEM_READ_WRITE | CL_MEM_SVM_FINE_GRAIN_BUFFER, size,
                (int) Math.min(properties.alignment(), 1 << 16));
        if (svm == null || svm.getNativePointer() == 0) {
            throw new BackendOutOfMemoryException("clSVMAlloc of " + size + " fine-grained bytes returned NULL on " + properties.device().describe());
        }
        long address = svm.getNativePointer();
        return new NativeAllocation(MemoryLocation.UNIFIED, address, size, MemorySegment.ofAddress(address).reinterpret(size),
                new OpenClBackend.SharedVirtualMemory(svm, address));
    }

    /**
     * Gives the memory back. Buffers are released (OpenCL keeps one alive until the commands using it finish);
     * PINNED is unmapped first; SVM waits for the queue to drain, as {@code clSVMFree} does not. A free that
     * arrives after the close released the queue and context releases what is left to release: the buffer itself,
     * or nothing for SVM, which went with its context. A PINNED buffer whose release is refused after its unmap throws
     * {@link FreeUnfinishedException}: held, out of use, and released by the next free.
     */
    void free(NativeAllocation allocation) {
        switch (allocation.handle()) {
            case cl_mem memory -> {
                keptSubBuffers.dropAll(memory);
                OpenClCalls.check(releaseMemObject(memory), "clReleaseMemObject");
                deviceBytes.giveBack(allocation.sizeBytes());
            }
            case OpenClBackend.PinnedBuffer pinned -> {
                // an unmap refused leaves the mapping, and the allocation usable: thrown as it is. One a refused release
                // left unmapped is not unmapped twice
                if (!unmappedPinned.contains(pinned.memory())) {
                    queue.runUnlessReleased(() -> OpenClCalls.check(
                            JoclCalls.clEnqueueUnmapMemObject(queue.commandQueue(), pinned.memory(), pinned.mapping(), 0, null, null), "clEnqueueUnmapMemObject"));
                    unmappedPinned.add(pinned.memory());
                }
                int released = releaseMemObject(pinned.memory());
                if (released != CL.CL_SUCCESS) {
                    // its host memory is unmapped now: the caller must keep it counted but never hand it out again
                    throw new FreeUnfinishedException("clReleaseMemObject of " + allocation.sizeBytes() + " pinned bytes failed"
                            + " after their unmap: " + CL.stringFor_errorCode(released) + "; the buffer is held, out of use");
                }
                unmappedPinned.remove(pinned.memory());
            }
            case Arena arena -> arena.close();
            case OpenClBackend.SharedVirtualMemory svm -> {
                // waited for outside the lifecycle lock, under which other threads queue their markers meanwhile
                boolean ended = queue.isReleased() || queue.queuedWorkEnds("clSVMFree");
                if (!ended) {
                    // a command queued earlier may still use it: kept, and refused, so that it stays counted as held (the
                    // caller's ledger, the live allocations the close keeps the context for) and a later free tries again
                    throw new DeviceTimeoutException("device work queued before the free of " + allocation.sizeBytes() + " bytes of"
                            + " shared virtual memory had not ended " + queue.deviceWait().toMillis() + " ms later"
                            + " (compute.memory.device-wait-timeout); the memory is kept, not freed under it", queue.deviceWait());
                }
                queue.runUnlessReleased(() -> JoclCalls.clSVMFree(queue.context(), svm.pointer()));
            }
            case null, default -> throw new IllegalArgumentException("not an allocation of this backend: " + allocation);
        }
        if (allocation.location() != MemoryLocation.HOST) {
            // counted out once given back: a buffer whose release was refused is still in the context, which the
            // backend's close must then keep for the device handles that may reach it
            liveAllocations.decrementAndGet();
        }
    }

    private int releaseMemObject(cl_mem memory) {
        int refused = failNextReleaseWith;
        if (refused != CL.CL_SUCCESS) {
            failNextReleaseWith = CL.CL_SUCCESS;
            return refused;
        }
        return JoclCalls.clReleaseMemObject(memory);
    }

    /**
     * A sub-buffer over {@code [offset, offset + bytes)} of a DEVICE or PINNED allocation, with the kernels' access in
     * {@code accessFlags}; the caller releases it. {@code offset} must be a multiple of the device's alignment.
     */
    cl_mem subBuffer(NativeAllocation allocation, long offset, long bytes, long accessFlags) {
        queue.checkOpen();
        long alignment = properties.alignment();
        if (offset % alignment != 0) {
            throw new IllegalArgumentException("a sub-buffer's origin must be a multiple of " + alignment
                    + " bytes (CL_DEVICE_MEM_BASE_ADDR_ALIGN) on " + properties.device().describe() + "; " + offset + " is not");
        }
        checkRange(allocation, offset, bytes);
        int[] error = new int[1];
        cl_mem sub = JoclCalls.clCreateSubBuffer(OpenClBackend.memObject(allocation), accessFlags, CL.CL_BUFFER_CREATE_TYPE_REGION,
                new cl_buffer_region(offset, bytes), error);
        OpenClCalls.check(error[0], "clCreateSubBuffer at offset " + offset + ", " + bytes + " bytes");
        return sub;
    }

    /**
     * As {@link #subBuffer}, kept for later accesses to the same bytes ({@link SubBuffers}): the caller releases its
     * reference, not the sub-buffer.
     */
    SubBuffers.Shared keptSubBuffer(NativeAllocation allocation, long offset, long bytes, long accessFlags) {
        queue.checkOpen();
        cl_mem parent = OpenClBackend.memObject(allocation);
        SubBuffers.Shared again = keptSubBuffers.recent(parent, offset, bytes, accessFlags); // the common case: no key, no lambda
        return again != null ? again : keptSubBuffers.acquire(parent, offset, bytes, accessFlags,
                () -> subBuffer(allocation, offset, bytes, accessFlags));
    }

    /** Drops the kept sub-buffers: the backend is closing (one an access still uses goes when the access ends). */
    void dropKeptSubBuffers() {
        keptSubBuffers.dropAll();
    }

    /** Sub-buffers kept for accesses now. */
    int keptSubBuffers() {
        return keptSubBuffers.size();
    }

    /**
     * A {@code CL_MEM_USE_HOST_PTR} buffer over {@code [offset, offset + bytes)} of host-accessible memory, for a
     * kernel on HOST or PINNED memory; the caller releases it. After a kernel writes it,
     * {@link OpenClQueue#enqueuePublishToHost} makes the results visible in host memory.
     */
    cl_mem hostMemoryBuffer(NativeAllocation allocation, long offset, long bytes, long accessFlags) {
        queue.checkOpen();
        checkRange(allocation, offset, bytes);
        MemorySegment host = allocation.hostSegment();
        if (host == null) {
            throw new IllegalArgumentException(allocation.location() + " memory on OpenCL is not host memory: " + allocation);
        }
        int[] error = new int[1];
        cl_mem wrapper = JoclCalls.clCreateBuffer(queue.context(), accessFlags | CL_MEM_USE_HOST_PTR, bytes,
                OpenClCalls.pointerAt(host.address() + offset), error);
        OpenClCalls.check(error[0], "clCreateBuffer(CL_MEM_USE_HOST_PTR) over " + bytes + " bytes of " + allocation.location() + " memory");
        return wrapper;
    }

    /** Throws unless {@code [offset, offset + bytes)} lies inside {@code allocation}. */
    static void checkRange(NativeAllocation allocation, long offset, long bytes) {
        if (offset < 0 || bytes < 0 || offset > allocation.sizeBytes() - bytes) {
            throw new IndexOutOfBoundsException("range [" + offset + ", " + offset + " + " + bytes + ") is outside the "
                    + allocation.sizeBytes() + "-byte " + allocation.location() + " allocation");
        }
    }
}
