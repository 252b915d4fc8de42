package dev.compute.memory.opencl;

import static org.jocl.CL.CL_MEM_READ_WRITE;

import dev.compute.memory.AccessMode;
import dev.compute.memory.BackendInfo;
import dev.compute.memory.DeviceMemoryInfo;
import dev.compute.memory.KernelSource;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.internal.HostPages;
import dev.compute.memory.spi.BackendAvailability;
import dev.compute.memory.spi.BackendOutOfMemoryException;
import dev.compute.memory.spi.BackendSettings;
import dev.compute.memory.spi.ComputeBackend;
import dev.compute.memory.spi.FileMappings;
import dev.compute.memory.spi.KernelOps;
import dev.compute.memory.spi.NativeAllocation;
import dev.compute.memory.spi.NativeKernel;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.Lock;
import org.jocl.Pointer;
import org.jocl.cl_command_queue;
import org.jocl.cl_context;
import org.jocl.cl_device_id;
import org.jocl.cl_mem;
import org.jspecify.annotations.Nullable;

/**
 * One OpenCL device: a context, one in-order command queue, and memory at four locations.
 *
 * <table>
 *   <caption>Locations, and what a {@link NativeAllocation}'s {@code handle} is at each</caption>
 *   <tr><th>location</th><th>memory</th><th>host-accessible</th><th>handle</th></tr>
 *   <tr><td>DEVICE</td><td>{@code clCreateBuffer(CL_MEM_READ_WRITE)}; its {@code address} is a number in a private,
 *       never-reused range (OpenCL buffers have none)</td><td>no</td><td>the {@code cl_mem}</td></tr>
 *   <tr><td>PINNED</td><td>{@code clCreateBuffer(CL_MEM_ALLOC_HOST_PTR)}, mapped for its whole life</td><td>yes</td>
 *       <td>{@link PinnedBuffer}: the {@code cl_mem} and its mapping</td></tr>
 *   <tr><td>HOST</td><td>off-heap memory from an FFM {@link Arena}</td><td>yes</td><td>the {@link Arena}</td></tr>
 *   <tr><td>UNIFIED</td><td>fine-grained buffer SVM ({@code clSVMAlloc}), where the device has it</td><td>yes</td>
 *       <td>{@link SharedVirtualMemory}: the SVM pointer</td></tr>
 * </table>
 *
 * <p><b>Blocks and alignment.</b> The pool carves blocks out of an allocation and passes (allocation, offset)
 * pairs. Copies work at any offset, and kernels take an element offset argument, so they work at any offset
 * that is a multiple of the element size. A {@code cl_mem} for a block of one's own kernels is a sub-buffer
 * ({@link #subBuffer}), whose origin must be a multiple of {@link #subBufferAlignment()}
 * ({@code CL_DEVICE_MEM_BASE_ADDR_ALIGN}); every allocation's size is rounded up to that alignment, so a pool
 * that aligns its blocks to it can make a sub-buffer of any block.
 *
 * <p><b>Out of memory.</b> {@code CL_MEM_OBJECT_ALLOCATION_FAILURE}, {@code CL_OUT_OF_RESOURCES} and
 * {@code CL_OUT_OF_HOST_MEMORY} become {@link BackendOutOfMemoryException}. OpenCL allocates lazily: a
 * {@code clCreateBuffer} may succeed and the failure surface at the buffer's first use, in a copy or a kernel;
 * then it is the same exception, from that call or from the command's future. So DEVICE buffers are counted, and
 * one that would take what this backend holds past {@code CL_DEVICE_GLOBAL_MEM_SIZE} is refused when it is asked for.
 * A request above {@code CL_DEVICE_MAX_MEM_ALLOC_SIZE} is refused up front with that limit in the message.
 *
 * <p><b>Copies.</b> Memory the host can address is copied by the host ({@link MemorySegment#copy}); a DEVICE
 * buffer through {@code clEnqueueReadBuffer}/{@code clEnqueueWriteBuffer} (from Java arrays directly when
 * blocking, through a native temporary when not) and {@code clEnqueueCopyBuffer} between buffers. Any segment over
 * a mapped file ({@link FileMappings#isOverMapping}: the mapping, and the views and accesses the manager hands out
 * over one) goes through a staging buffer of {@code stagingBufferBytes}, one chunk at a time, copied by Java, which
 * survives a file truncated under its mapping; the async forms copy it so too, before they return. The async
 * forms complete once their command is {@code CL_COMPLETE} ({@link EventCompletions}). {@link #memoryInfo()}
 * knows the device's total but not its free memory: OpenCL has no portable query for it.
 *
 * <p><b>One's own kernels.</b> {@link #compileKernel} builds an OpenCL C kernel for {@code manager.kernels()}
 * ({@link OpenClKernel}: launches checked against its parameters, a {@code cl_kernel} per launch under way, unaligned
 * slices staged); {@link #nativeDevice()} gives the context, device and queue to code that builds its own. A device
 * access's handle ({@link #openDeviceHandle}) is an {@link OpenClDeviceHandle}:
 * the buffer, queue and context for the access's bytes. Its work is known by a marker on the queue, and work it
 * records from queues of one's own by a second waiter, so that slow foreign work never holds up the completions
 * of this queue. {@link #awaitIdle} waits for both.
 *
 * <p>Thread-safe: OpenCL's enqueue calls are, and the kernel ops serialise setting a kernel's arguments.
 */
public final class OpenClBackend implements ComputeBackend {

    /** The signal-chaining advice is logged once per process, not once per manager. */
    private static final AtomicBoolean SIGNAL_ADVICE_GIVEN = new AtomicBoolean();

    /**
     * PINNED's handle: the buffer and the mapping its host segment lives in, unmapped when it is freed. Equal by
     * the buffer alone: a {@link ByteBuffer}'s hash follows its contents, and the pool keys allocations by value.
     */
    public record PinnedBuffer(cl_mem memory, ByteBuffer mapping) {
        @Override
        public boolean equals(Object other) {
            return other instanceof PinnedBuffer pinned && pinned.memory.equals(memory);
        }

        @Override
        public int hashCode() {
            return memory.hashCode();
        }
    }

    /** UNIFIED's handle: the SVM pointer JOCL returned and its address, equal by the address (JOCL's pointer hashes its contents). */
    public record SharedVirtualMemory(Pointer pointer, long address) {
        @Override
        public boolean equals(Object other) {
            return other instanceof SharedVirtualMemory svm && svm.address == address;
        }

        @Override
        public int hashCode() {
            return Long.hashCode(address);
        }
    }

    private final OpenClDevice device;
    private final int deviceIndex;
    private final OpenClDeviceProperties properties;
    private final OpenClQueue queue;
    private final OpenClAllocator allocator;
    private final OpenClCopies copies;
    private final OpenClKernelOps ops;
    /** One's own kernels compiled on this backend, released by close(). */
    private final Set<OpenClKernel> kernels = ConcurrentHashMap.newKeySet();
    private final OpenClNativeDevice nativeDevice = new OpenClNativeDevice(this);

    OpenClBackend(OpenClDevice device, BackendSettings settings) {
        this.device = device;
        this.deviceIndex = settings.deviceIndex();
        this.properties = OpenClDeviceProperties.read(device);
        this.queue = new OpenClQueue(device, properties.markersTakeWaitLists(), settings.deviceWaitTimeout());
        this.allocator = new OpenClAllocator(properties, queue);
        this.copies = new OpenClCopies(queue, settings.stagingBufferBytes());
        this.ops = new OpenClKernelOps(this);
        String advice = signalChainingAdvice(device.platformName(), System.getenv("LD_PRELOAD"));
        if (advice != null && SIGNAL_ADVICE_GIVEN.compareAndSet(false, true)) {
            System.getLogger(OpenClBackend.class.getName()).log(System.Logger.Level.WARNING, advice);
        }
    }

    /**
     * What to tell a user of PoCL whose JVM runs without signal chaining, else null. PoCL builds kernels with LLVM,
     * which installs handlers for SIGSEGV and other signals; the JVM raises SIGSEGV itself all the time (safepoint
     * polls, null checks), LLVM's handler then runs first: it deletes the files of a build under way (the build fails)
     * and can end the process. The JVM's libjsig keeps the JVM's handlers first.
     */
    static @Nullable String signalChainingAdvice(String platformName, @Nullable String ldPreload) {
        if (!platformName.contains("Portable Computing Language") || (ldPreload != null && ldPreload.contains("libjsig"))) {
            return null;
        }
        return "OpenCL platform '" + platformName + "' builds kernels with LLVM, whose signal handlers take the JVM's own"
                + " signals: a kernel build under way while the JVM stops threads for a garbage collection can fail"
                + " (CL_BUILD_PROGRAM_FAILURE, 'unable to rename temporary') or end the process (SIGSEGV). Start the JVM with"
                + " LD_PRELOAD=$JAVA_HOME/lib/libjsig.so (the JVM's signal chaining) to keep its handlers first.";
    }

    // ---- what the device is -----------------------------------------------------------------------------------

    @Override
    public BackendInfo info() {
        return new BackendInfo(OpenClBackendProvider.NAME, deviceIndex, device.deviceName() + " (" + device.platformName() + ")",
                properties.globalMemory());
    }

    /** The total is {@code CL_DEVICE_GLOBAL_MEM_SIZE}; free memory is -1: OpenCL has no portable query for it. */
    @Override
    public DeviceMemoryInfo memoryInfo() {
        return new DeviceMemoryInfo(-1, properties.globalMemory());
    }

    @Override
    public MemoryLocation defaultLocation() {
        return MemoryLocation.DEVICE;
    }

    @Override
    public BackendAvailability supports(MemoryLocation location) {
        return switch (location) {
            case DEVICE -> BackendAvailability.available("OpenCL buffers on " + device.describe());
            case HOST -> BackendAvailability.available("off-heap host memory");
            case PINNED -> BackendAvailability.available("CL_MEM_ALLOC_HOST_PTR buffers, mapped for host access");
            case UNIFIED -> properties.unifiedSupport();
        };
    }

    @Override
    public boolean hostAccessible(MemoryLocation location) {
        return location != MemoryLocation.DEVICE && supports(location).available();
    }

    /** {@code CL_DEVICE_MEM_BASE_ADDR_ALIGN} in bytes: sub-buffer origins must be multiples of it; allocation sizes are. */
    public long subBufferAlignment() {
        return properties.alignment();
    }

    /** {@code CL_DEVICE_MAX_MEM_ALLOC_SIZE}: the largest single allocation. */
    public long maxAllocationBytes() {
        return properties.maxAllocation();
    }

    /** {@code CL_DEVICE_MAX_MEM_ALLOC_SIZE} at every location but HOST, whose memory is the JVM's own. */
    @Override
    public long maxAllocationBytes(MemoryLocation location) {
        return location == MemoryLocation.HOST ? Long.MAX_VALUE : properties.maxAllocation();
    }

    /** Whether the device has {@code cl_khr_fp64}, which the FLOAT64 ops need. */
    public boolean hasDoublePrecision() {
        return properties.doublePrecision();
    }

    /** The context, for one's own kernels on this backend's buffers. */
    public cl_context context() {
        return queue.context();
    }

    /** The in-order queue every copy and kernel of this backend goes through. */
    public cl_command_queue commandQueue() {
        return queue.commandQueue();
    }

    public cl_device_id deviceId() {
        return device.deviceId();
    }

    /** The {@code cl_mem} behind a DEVICE or PINNED allocation. */
    public static cl_mem memObject(NativeAllocation allocation) {
        return switch (allocation.handle()) {
            case cl_mem memory -> memory;
            case PinnedBuffer pinned -> pinned.memory();
            case null, default -> throw new IllegalArgumentException(allocation.location()
                    + " memory on OpenCL is no cl_mem buffer (HOST is plain host memory, UNIFIED is SVM)");
        };
    }

    /**
     * A sub-buffer over {@code [offset, offset + bytes)} of a DEVICE or PINNED allocation, for one's own kernels;
     * release it with {@code clReleaseMemObject}. {@code offset} must be a multiple of {@link #subBufferAlignment()}.
     */
    public cl_mem subBuffer(NativeAllocation allocation, long offset, long bytes) {
        return queue.asCall(() -> allocator.subBuffer(allocation, offset, bytes, CL_MEM_READ_WRITE));
    }

    // ---- one's own kernels ------------------------------------------------------------------------------------

    /**
     * The {@code cl_mem} (or SVM pointer), queue and context for {@code bytes} bytes at {@code offset} of
     * {@code allocation}; see {@link OpenClDeviceHandle} for what each location gives. HOST memory is refused with
     * an {@link IllegalArgumentException}: it is no OpenCL buffer.
     */
    @Override
    public OpenClDeviceHandle openDeviceHandle(NativeAllocation allocation, long offset, long bytes, AccessMode mode) {
        checkOpen();
        OpenClAllocator.checkRange(allocation, offset, bytes);
        Lock call = queue.enterCall(); // as asCall, with no lambda made on every device access
        try {
            return OpenClDeviceHandle.open(this, allocation, offset, bytes, mode);
        } finally {
            call.unlock();
        }
    }

    /** One's own kernels are OpenCL C ({@link KernelSource#openCl}). */
    @Override
    public Set<KernelSource.Language> kernelLanguages() {
        return Set.of(KernelSource.Language.OPENCL_C);
    }

    /** Builds an OpenCL C kernel on this backend's device: see {@link OpenClKernel}. Released when the backend closes. */
    @Override
    public NativeKernel compileKernel(KernelSource source) {
        if (source.language() != KernelSource.Language.OPENCL_C) {
            throw new UnsupportedOperationException("the opencl backend builds OpenCL C kernels (KernelSource.openCl), not " + source);
        }
        checkOpen();
        return queue.asCall(() -> { // the build uses the context, which the close waits for it to release
            OpenClKernel kernel = OpenClKernel.build(this, source);
            if (queue.runWhileOpen(() -> kernels.add(kernel))) {
                return kernel;
            }
            kernel.release();
            throw new IllegalStateException("this OpenCL backend (" + device.describe() + ") closed while " + source + " was built");
        });
    }

    /** The context, device and queue, for code that builds its own programs: see {@link OpenClNativeDevice}. */
    @Override
    public OpenClNativeDevice nativeDevice() {
        return nativeDevice;
    }

    /**
     * Waits, at most {@code timeout}, for every command queued so far on this backend's queue (a marker, never an
     * unbounded {@code clFinish}) and every work recorded on a device handle; true when all of it has ended, failed
     * commands included. On a closed backend: whether close has finished them.
     */
    @Override
    public boolean awaitIdle(Duration timeout) {
        return queue.awaitIdle(timeout);
    }

    // ---- allocation -------------------------------------------------------------------------------------------

    // Allocations, sub-buffers and device handles are calls the close waits for (OpenClQueue.asCall), as copies are:
    // they create buffers in the context (a PINNED one is mapped on the transfer queue), which the close releases.

    /** A fresh allocation of {@code sizeBytes} rounded up to {@link #subBufferAlignment()}. */
    @Override
    public NativeAllocation allocate(MemoryLocation location, long sizeBytes) {
        checkOpen();
        return queue.asCall(() -> allocator.allocate(location, sizeBytes));
    }

    /** HOST memory is {@code malloc}ed: its pages can go back; the device's, pinned and shared memory's do not. */
    @Override
    public long discardPages(NativeAllocation allocation, long offset, long bytes) {
        return allocation.location() == MemoryLocation.HOST ? HostPages.discard(allocation.address() + offset, bytes) : 0;
    }

    /**
     * Gives the memory back. Buffers are released (OpenCL keeps one alive until the commands using it finish);
     * PINNED is unmapped first; SVM waits for the queue to drain, as {@code clSVMFree} does not. A free that
     * arrives after {@link #close()} released the queue and context releases what is left to release: the
     * buffer itself, or nothing for SVM, which went with its context. A PINNED buffer whose release is refused after
     * its unmap throws {@link dev.compute.memory.spi.FreeUnfinishedException}: held, out of use, released by the next free.
     */
    @Override
    public void free(NativeAllocation allocation) {
        allocator.free(allocation);
    }

    // ---- copies ---------------------------------------------------------------------------------------------

    // Each copy is a call the close waits for (OpenClQueue.asCall): a blocking one runs chunk after chunk on the
    // transfer queue, which close releases once the calls under way have ended.

    @Override
    public void copyToDevice(MemorySegment source, NativeAllocation target, long targetOffset, long bytes) {
        checkOpen();
        OpenClAllocator.checkRange(target, targetOffset, bytes);
        queue.runAsCall(() -> copies.toDevice(source, target, targetOffset, bytes));
    }

    @Override
    public void copyToHost(NativeAllocation source, long sourceOffset, MemorySegment target, long bytes) {
        checkOpen();
        OpenClAllocator.checkRange(source, sourceOffset, bytes);
        queue.runAsCall(() -> copies.toHost(source, sourceOffset, target, bytes));
    }

    @Override
    public void copyWithinDevice(NativeAllocation source, long sourceOffset, NativeAllocation target, long targetOffset, long bytes) {
        checkOpen();
        OpenClAllocator.checkRange(source, sourceOffset, bytes);
        OpenClAllocator.checkRange(target, targetOffset, bytes);
        queue.runAsCall(() -> copies.withinDevice(source, sourceOffset, target, targetOffset, bytes));
    }

    @Override
    public CompletableFuture<Void> copyToDeviceAsync(MemorySegment source, NativeAllocation target, long targetOffset, long bytes) {
        checkOpen();
        OpenClAllocator.checkRange(target, targetOffset, bytes);
        return queue.asCall(() -> copies.toDeviceQueued(source, target, targetOffset, bytes));
    }

    @Override
    public CompletableFuture<Void> copyToHostAsync(NativeAllocation source, long sourceOffset, MemorySegment target, long bytes) {
        checkOpen();
        OpenClAllocator.checkRange(source, sourceOffset, bytes);
        return queue.asCall(() -> copies.toHostQueued(source, sourceOffset, target, bytes));
    }

    // ---- what the kernel ops use --------------------------------------------------------------------------------

    @Override
    public KernelOps ops() {
        checkOpen();
        return ops;
    }

    /**
     * Every command of this backend that may still run when its call returns goes through its one in-order queue (its
     * blocking copies, run on a queue of their own, are over by then), so work of the backend's (copies, ops, a device
     * access's marker) needs no ordering; work a handle recorded from a queue of the user's own gets a barrier with its
     * event on this queue. Other futures are waited for on the host.
     */
    @Override
    public boolean orderAfter(CompletableFuture<?> work) {
        return queue.orderAfter(work);
    }

    /** Work on this backend's one in-order queue completes in the order it was queued. */
    @Override
    public boolean supersedes(CompletableFuture<?> later, CompletableFuture<?> earlier) {
        return OpenClQueue.supersedes(later, earlier);
    }

    OpenClDevice device() {
        return device;
    }

    int computeUnits() {
        return properties.computeUnits();
    }

    /** The queue, its markers and positions, for the kernels, ops and device handles. */
    OpenClQueue queue() {
        return queue;
    }

    /** Sub-buffers and host-memory buffers, for the kernels, ops and device handles. */
    OpenClAllocator allocator() {
        return allocator;
    }

    void checkOpen() {
        queue.checkOpen();
    }

    /**
     * Refuses new work, waits for every queued command, every work recorded on a device handle and every future's
     * dependent actions (the pool's deferred frees among them), then releases the kernels, queue and context.
     * Closing twice is harmless. The wait is bounded ({@link #DEVICE_WAIT_AT_CLOSE}): on a device whose work does not
     * finish in time, the queue, context and the threads waiting on events are kept rather than released under the
     * work, and a warning says so.
     */
    @Override
    public void close() {
        close(DEVICE_WAIT_AT_CLOSE);
    }

    /** How long close() waits for queued and recorded work before it keeps what that work may use. */
    static final Duration DEVICE_WAIT_AT_CLOSE = Duration.ofSeconds(10);

    @Override
    public void close(Duration deviceWait) {
        queue.close(deviceWait, allocator::holdsMemory, () -> {
            allocator.dropKeptSubBuffers();
            ops.release();
            kernels.forEach(OpenClKernel::release);
        });
    }
}
