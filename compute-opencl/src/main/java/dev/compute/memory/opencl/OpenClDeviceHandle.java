package dev.compute.memory.opencl;

import static org.jocl.CL.CL_MEM_READ_ONLY;
import static org.jocl.CL.CL_MEM_READ_WRITE;
import static org.jocl.CL.CL_MEM_WRITE_ONLY;

import dev.compute.memory.AccessMode;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.spi.DeviceHandle;
import dev.compute.memory.spi.NativeAllocation;
import dev.compute.memory.spi.WorkGroup;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import org.jocl.CL;
import org.jocl.Pointer;
import org.jocl.cl_command_queue;
import org.jocl.cl_context;
import org.jocl.cl_device_id;
import org.jocl.cl_event;
import org.jocl.cl_mem;
import org.jspecify.annotations.Nullable;

/**
 * What one's own OpenCL code needs for the bytes of a device access: take it with
 * {@code access.handle(OpenClDeviceHandle.class)}, valid while the access is open.
 *
 * <pre>{@code
 * try (BufferAccess access = y.deviceAccess(AccessMode.READ_WRITE)) {
 *     OpenClDeviceHandle cl = access.handle(OpenClDeviceHandle.class);
 *     clSetKernelArg(kernel, 0, Sizeof.cl_mem, Pointer.to(cl.memory()));
 *     clSetKernelArg(kernel, 1, Sizeof.cl_ulong, Pointer.to(new long[] {cl.offset() / Sizeof.cl_float}));
 *     clEnqueueNDRangeKernel(cl.queue(), kernel, 1, null, new long[] {n}, null, 0, null, null);
 * } // the launch is in flight on the buffer; its device copy is the newer one
 * }</pre>
 *
 * <table>
 *   <caption>What each location gives</caption>
 *   <tr><th>location</th><th>{@link #memory()}</th><th>{@link #offset()}</th><th>kernels' access</th></tr>
 *   <tr><td>DEVICE, block offset a multiple of {@code subBufferAlignment()}</td><td>a sub-buffer over exactly the
 *       bytes ({@link #isSubBuffer()})</td><td>0</td><td>the sub-buffer's flags follow the mode: READ
 *       {@code CL_MEM_READ_ONLY}, WRITE {@code CL_MEM_WRITE_ONLY}, READ_WRITE {@code CL_MEM_READ_WRITE}</td></tr>
 *   <tr><td>DEVICE at any other offset (a slice)</td><td>the pool's buffer the block lies in</td><td>where the bytes
 *       start in it: pass it to the kernel (in elements) and stay inside {@link #byteSize()}</td>
 *       <td>read-write whatever the mode: the buffer is shared with other blocks</td></tr>
 *   <tr><td>PINNED</td><td>a {@code CL_MEM_USE_HOST_PTR} buffer over exactly the bytes (the pool's pinned buffer is
 *       mapped for its whole life, and OpenCL leaves kernels on a mapped buffer undefined); a writing access ends
 *       with a map and unmap, so the results are in host memory on every implementation</td><td>0</td>
 *       <td>flags as for a sub-buffer</td></tr>
 *   <tr><td>UNIFIED</td><td>none: fine-grained SVM has no {@code cl_mem}; {@link #memory()} and {@link #offset()}
 *       throw. Pass {@link #svmPointer()} with {@code clSetKernelArgSVMPointer}</td><td>in the pointer</td>
 *       <td>read-write</td></tr>
 *   <tr><td>HOST</td><td colspan="3">refused when the access opens ({@link IllegalArgumentException}): plain host
 *       memory is no OpenCL buffer. Allocate DEVICE or PINNED memory for kernels, or use a host access</td></tr>
 * </table>
 *
 * <p><b>Ordering.</b> Queue work on {@link #queue()}, the backend's in-order queue: it then runs after every copy,
 * op and kernel before it (work recorded from other queues included: the access put a barrier in the queue on a user
 * event of the backend's, set once that work has ended, well or not; the host does not wait), and when the access ends a marker on that queue says when it is done. Work on
 * a queue of one's own (in {@link #context()}) runs beside the backend's queue: give its commands {@link #waitList()}
 * as their wait list, so they run after the buffer's earlier work, and hand its event to {@link #recordWork}, or
 * nothing keeps the memory for it. Its completion then joins what {@link #end()} returns, so the buffer's memory is
 * not reused, nor read by the host, before it completes.
 *
 * <p>Everything here stops working when the access ends: the methods throw {@link IllegalStateException}, and a
 * {@code cl_mem} taken earlier must not be used (a host-pointer buffer is released then, OpenCL keeping it alive for
 * commands already queued; a sub-buffer is kept by the backend for the next access to the same bytes, which may then
 * belong to another buffer). Do not release what the handle gives: it owns it, the backend or the pool does.
 * Thread-safe.
 */
public final class OpenClDeviceHandle implements DeviceHandle {

    /** What {@link #memory()} is. */
    private enum Kind {
        SUB_BUFFER, POOL_BUFFER, HOST_MEMORY_BUFFER, SHARED_VIRTUAL_MEMORY
    }

    private static final cl_event[] NO_EVENTS = {};
    /** Why HOST memory has no handle: said by a device access, and by a launch before it opens any. */
    static final String HOST_REFUSED = "HOST memory on OpenCL is plain host memory, no OpenCL buffer, so kernels cannot reach it "
            + "through a device access: allocate DEVICE (or PINNED) memory for your own kernels, or use hostAccess(...) for host code";

    private final OpenClBackend backend;
    private final MemoryLocation location;
    private final AccessMode mode;
    private final Kind kind;
    private final @Nullable cl_mem memory;
    /** The kept sub-buffer {@link #memory} is, whose reference the end lets go of. */
    private final SubBuffers.@Nullable Shared subBuffer;
    private final OpenClBackend.@Nullable SharedVirtualMemory svm;
    private final long offset;
    private final long bytes;
    /** Futures of the work recorded from other queues. */
    private @Nullable List<CompletableFuture<Void>> recorded;
    private boolean ended;
    /** The marker {@link #waitList()} gives, made on the first call. */
    private @Nullable cl_event ready;

    private OpenClDeviceHandle(OpenClBackend backend, MemoryLocation location, AccessMode mode, Kind kind,
                               @Nullable cl_mem memory, OpenClBackend.@Nullable SharedVirtualMemory svm, long offset, long bytes) {
        this(backend, location, mode, kind, memory, null, svm, offset, bytes);
    }

    private OpenClDeviceHandle(OpenClBackend backend, AccessMode mode, SubBuffers.Shared subBuffer, long bytes) {
        this(backend, MemoryLocation.DEVICE, mode, Kind.SUB_BUFFER, subBuffer.memory(), subBuffer, null, 0, bytes);
    }

    private OpenClDeviceHandle(OpenClBackend backend, MemoryLocation location, AccessMode mode, Kind kind, @Nullable cl_mem memory,
                               SubBuffers.@Nullable Shared subBuffer, OpenClBackend.@Nullable SharedVirtualMemory svm, long offset, long bytes) {
        this.backend = backend;
        this.location = location;
        this.mode = mode;
        this.kind = kind;
        this.memory = memory;
        this.subBuffer = subBuffer;
        this.svm = svm;
        this.offset = offset;
        this.bytes = bytes;
    }

    /** The handle for {@code bytes} at {@code offset} of {@code allocation}, by the table in the class comment. */
    static OpenClDeviceHandle open(OpenClBackend backend, NativeAllocation allocation, long offset, long bytes, AccessMode mode) {
        OpenClDeviceHandle handle = of(backend, allocation, offset, bytes, mode);
        backend.queue().handleOpened(); // until it ends, its holder may queue what it likes on the backend's queue
        return handle;
    }

    private static OpenClDeviceHandle of(OpenClBackend backend, NativeAllocation allocation, long offset, long bytes, AccessMode mode) {
        MemoryLocation location = allocation.location();
        return switch (location) {
            case DEVICE -> offset % backend.subBufferAlignment() == 0
                    ? new OpenClDeviceHandle(backend, mode, backend.allocator().keptSubBuffer(allocation, offset, bytes, accessFlags(mode)), bytes)
                    : new OpenClDeviceHandle(backend, location, mode, Kind.POOL_BUFFER, OpenClBackend.memObject(allocation), null, offset, bytes);
            case PINNED -> new OpenClDeviceHandle(backend, location, mode, Kind.HOST_MEMORY_BUFFER,
                    backend.allocator().hostMemoryBuffer(allocation, offset, bytes, accessFlags(mode)), null, 0, bytes);
            case UNIFIED -> new OpenClDeviceHandle(backend, location, mode, Kind.SHARED_VIRTUAL_MEMORY, null,
                    (OpenClBackend.SharedVirtualMemory) Objects.requireNonNull(allocation.handle()), offset, bytes);
            case HOST -> throw new IllegalArgumentException(HOST_REFUSED);
        };
    }

    private static long accessFlags(AccessMode mode) {
        return switch (mode) {
            case READ -> CL_MEM_READ_ONLY;
            case WRITE -> CL_MEM_WRITE_ONLY;
            case READ_WRITE -> CL_MEM_READ_WRITE;
        };
    }

    /** The buffer the bytes lie in, at {@link #offset()}; see the class comment for what it is at each location. */
    public synchronized cl_mem memory() {
        checkUsable();
        if (memory == null) {
            throw new IllegalStateException(noBuffer());
        }
        return memory;
    }

    /** Where the bytes start in {@link #memory()}, in bytes: 0 unless it is the pool's buffer (a block at an unaligned offset). */
    public synchronized long offset() {
        checkUsable();
        if (memory == null) {
            throw new IllegalStateException(noBuffer());
        }
        return offset;
    }

    /** True when {@link #memory()} is a sub-buffer over exactly the bytes (kept by the backend for later accesses to them). */
    public synchronized boolean isSubBuffer() {
        checkUsable();
        return kind == Kind.SUB_BUFFER;
    }

    /** The SVM pointer at the bytes, for {@code clSetKernelArgSVMPointer}: UNIFIED memory only. */
    public synchronized Pointer svmPointer() {
        return sharedVirtualMemory().pointer().withByteOffset(offset);
    }

    /** The bytes' address in the shared virtual address space: UNIFIED memory only. */
    public synchronized long svmAddress() {
        return sharedVirtualMemory().address() + offset;
    }

    /** The number of bytes the access covers. */
    public long byteSize() {
        return bytes;
    }

    public MemoryLocation location() {
        return location;
    }

    public AccessMode mode() {
        return mode;
    }

    /** The backend's in-order queue: work queued here is covered when the access ends. */
    public synchronized cl_command_queue queue() {
        checkUsable();
        return backend.commandQueue();
    }

    /** The context the memory belongs to: make programs and queues of one's own in it. */
    public synchronized cl_context context() {
        checkUsable();
        return backend.context();
    }

    public synchronized cl_device_id device() {
        checkUsable();
        return backend.deviceId();
    }

    /**
     * The wait list for commands on these bytes queued on a queue of one's own: a marker on the backend's queue after
     * everything queued there so far (the buffer's earlier copies, ops and kernels). The handle owns the event and
     * releases it when the access ends; OpenCL keeps it for the commands that wait on it.
     */
    public synchronized cl_event[] waitList() {
        checkUsable();
        if (ready == null) {
            ready = backend.queue().markerEvent();
        }
        return new cl_event[] {ready};
    }

    /**
     * Work on these bytes queued on a queue of one's own (in {@link #context()}): the handle retains
     * {@code event}, flushes its queue, and the buffer's memory is neither reused nor read by the host before the
     * command completes. Record it as soon as it is queued.
     */
    public synchronized void recordWork(cl_event event) {
        Objects.requireNonNull(event, "event");
        checkUsable();
        if (recorded == null) {
            recorded = new ArrayList<>();
        }
        recorded.add(backend.queue().trackRecorded(event));
    }

    /**
     * Ends the handle, once (its access calls it): a marker on the backend's queue (after publishing a written
     * host-memory buffer), joined with the recorded work; then releases the host-memory buffer, which OpenCL keeps
     * alive for the commands already queued, or lets go of the kept sub-buffer. A written host-memory buffer with
     * recorded work is published once that work has ended ({@link #publishAfter}).
     */
    @Override
    public CompletableFuture<Void> end() {
        @Nullable List<CompletableFuture<Void>> work;
        synchronized (this) {
            if (ended) {
                throw new IllegalStateException("this OpenCL device handle has ended already");
            }
            ended = true;
            work = recorded;
        }
        boolean publish = kind == Kind.HOST_MEMORY_BUFFER && mode.writes();
        boolean releasedLater = false;
        try {
            if (publish && work != null) {
                CompletableFuture<Void> all = publishAfter(work);
                releasedLater = true;
                return all;
            }
            CompletableFuture<Void> queued = publish
                    ? backend.queue().publishToHostThenMarker(Objects.requireNonNull(memory), bytes, NO_EVENTS)
                    : backend.queue().position();
            if (work == null) {
                return queued;
            }
            List<CompletableFuture<Void>> all = new ArrayList<>(work);
            all.add(queued);
            return WorkGroup.of(all);
        } finally {
            backend.queue().handleEnded(); // after the position above counted what the holder queued
            if (ready != null) {
                JoclCalls.clReleaseEvent(ready);
            }
            if (subBuffer != null) {
                subBuffer.release();
            } else if (kind == Kind.HOST_MEMORY_BUFFER && !releasedLater) {
                JoclCalls.clReleaseMemObject(memory);
            }
        }
    }

    /**
     * A written host-memory buffer with work recorded from queues of one's own: what the holder queued on the backend's
     * queue, the recorded work, and the buffer published to host memory once that work has ended, well or not, then
     * released. A map waiting for the recorded work in the backend's in-order queue would hold up every command queued
     * behind it for as long as that work runs, and its failure would be the queue's (PoCL ends the process then).
     */
    private CompletableFuture<Void> publishAfter(List<CompletableFuture<Void>> work) {
        cl_mem buffer = Objects.requireNonNull(memory);
        CompletableFuture<Void> queued = backend.queue().position();
        CompletableFuture<Void> published = WorkGroup.of(work).handle((ignored, failed) -> null)
                .thenCompose(ignored -> backend.queue().publishToHostThenMarker(buffer, bytes, NO_EVENTS))
                .whenComplete((ignored, failed) -> JoclCalls.clReleaseMemObject(buffer));
        List<CompletableFuture<Void>> all = new ArrayList<>(work);
        all.add(queued);
        all.add(published);
        return WorkGroup.of(all);
    }

    private OpenClBackend.SharedVirtualMemory sharedVirtualMemory() {
        checkUsable();
        if (svm == null) {
            throw new IllegalStateException(location + " memory on OpenCL is an OpenCL buffer, not shared virtual memory: use memory() and offset()");
        }
        return svm;
    }

    private String noBuffer() {
        return "UNIFIED memory on OpenCL is fine-grained shared virtual memory, which has no cl_mem: pass svmPointer() "
                + "to clSetKernelArgSVMPointer";
    }

    private void checkUsable() {
        if (ended) {
            throw new IllegalStateException("this OpenCL device handle's access has ended; open a new device access");
        }
        backend.checkOpen();
    }

    @Override
    public synchronized String toString() {
        return "OpenClDeviceHandle[" + location + ", " + mode + ", " + bytes + " bytes, " + switch (kind) {
            case SUB_BUFFER -> "a sub-buffer";
            case POOL_BUFFER -> "at " + offset + " of the pool's buffer";
            case HOST_MEMORY_BUFFER -> "a buffer over host memory";
            case SHARED_VIRTUAL_MEMORY -> "SVM at " + offset;
        } + (ended ? ", ended" : "") + "]";
    }
}
