package dev.compute.memory.opencl;

import static org.jocl.CL.CL_DEVICE_DOUBLE_FP_CONFIG;
import static org.jocl.CL.CL_DEVICE_EXTENSIONS;
import static org.jocl.CL.CL_DEVICE_GLOBAL_MEM_SIZE;
import static org.jocl.CL.CL_DEVICE_MAX_COMPUTE_UNITS;
import static org.jocl.CL.CL_DEVICE_MAX_MEM_ALLOC_SIZE;
import static org.jocl.CL.CL_DEVICE_MEM_BASE_ADDR_ALIGN;
import static org.jocl.CL.CL_DEVICE_SVM_CAPABILITIES;
import static org.jocl.CL.CL_DEVICE_SVM_COARSE_GRAIN_BUFFER;
import static org.jocl.CL.CL_DEVICE_SVM_FINE_GRAIN_BUFFER;
import static org.jocl.CL.CL_EVENT_COMMAND_QUEUE;
import static org.jocl.CL.CL_EVENT_CONTEXT;
import static org.jocl.CL.CL_MAP_READ;
import static org.jocl.CL.CL_MAP_WRITE;
import static org.jocl.CL.CL_MEM_ALLOC_HOST_PTR;
import static org.jocl.CL.CL_MEM_READ_WRITE;
import static org.jocl.CL.CL_MEM_SVM_FINE_GRAIN_BUFFER;
import static org.jocl.CL.CL_MEM_USE_HOST_PTR;

import dev.compute.memory.AccessMode;
import dev.compute.memory.BackendInfo;
import dev.compute.memory.DeviceMemoryInfo;
import dev.compute.memory.KernelSource;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.spi.BackendAvailability;
import dev.compute.memory.internal.BytesLedger;
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
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.jocl.CL;
import org.jocl.Pointer;
import org.jocl.Sizeof;
import org.jocl.cl_buffer_region;
import org.jocl.cl_command_queue;
import org.jocl.cl_context;
import org.jocl.cl_context_properties;
import org.jocl.cl_device_id;
import org.jocl.cl_event;
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
    private final OpenClCopies copies;
    private final long alignment;
    private final long maxAllocation;
    private final long globalMemory;
    /** Bytes of DEVICE buffers held, against {@link #globalMemory} ({@link #takeDeviceMemory}). */
    private final BytesLedger deviceBytes;
    private final long svmCapabilities;
    private final boolean doublePrecision;
    private final int computeUnits;
    private final cl_context context;
    private final cl_command_queue queue;
    /** Markers: {@code clEnqueueMarkerWithWaitList} from OpenCL 1.2, the deprecated {@code clEnqueueMarker} before. */
    private final boolean markersTakeWaitLists;
    private final EventCompletions completions;
    /** Work that device handles recorded from queues of the user's own, waited for apart from this queue's. */
    private final EventCompletions recordedWork;
    /** Positions on {@link #queue} for kernels and accesses, known done by markers the waiter queues. */
    private final QueuePositions positions;
    private final OpenClKernelOps ops;
    /** One's own kernels compiled on this backend, released by close(). */
    private final Set<OpenClKernel> kernels = ConcurrentHashMap.newKeySet();
    private final OpenClNativeDevice nativeDevice = new OpenClNativeDevice(this);
    /** Set, under {@link #lifecycle}, when close() begins: new work is refused. */
    private volatile boolean closed;
    /** Completes when close() has finished the queue and every recorded work. */
    private final CompletableFuture<Void> drained = new CompletableFuture<>();
    /**
     * OpenCL buffers have no address: a DEVICE allocation's is taken from this counter, which hands out ranges
     * of the allocation's size that are never reused, so that allocations never overlap in the pool's view.
     */
    private final AtomicLong nextDeviceAddress;
    /** Guards the queue and context: {@link #closed} and {@link #released} are set under this lock. */
    private final Object lifecycle = new Object();
    private boolean released;

    OpenClBackend(OpenClDevice device, BackendSettings settings) {
        this.device = device;
        this.deviceIndex = settings.deviceIndex();
        cl_device_id id = device.deviceId();
        this.alignment = Math.max(1, OpenClCalls.deviceLong(id, CL_DEVICE_MEM_BASE_ADDR_ALIGN) / 8);
        this.nextDeviceAddress = new AtomicLong(alignment);
        this.maxAllocation = OpenClCalls.deviceLong(id, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
        this.globalMemory = OpenClCalls.deviceLong(id, CL_DEVICE_GLOBAL_MEM_SIZE);
        this.deviceBytes = new BytesLedger(globalMemory);
        this.computeUnits = (int) OpenClCalls.deviceLong(id, CL_DEVICE_MAX_COMPUTE_UNITS);
        // SVM needs an OpenCL 2.0 device; older ones do not know the query
        this.svmCapabilities = openClVersionAtLeast(device.version(), 2, 0) ? OpenClCalls.deviceLongOr(id, CL_DEVICE_SVM_CAPABILITIES, 0) : 0;
        this.markersTakeWaitLists = openClVersionAtLeast(device.version(), 1, 2);
        this.doublePrecision = OpenClCalls.deviceLongOr(id, CL_DEVICE_DOUBLE_FP_CONFIG, 0) != 0
                || List.of(OpenClCalls.deviceString(id, CL_DEVICE_EXTENSIONS).split(" ")).contains("cl_khr_fp64");
        cl_context_properties properties = new cl_context_properties();
        properties.addProperty(CL.CL_CONTEXT_PLATFORM, device.platformId());
        int[] error = new int[1];
        this.context = CL.clCreateContext(properties, 1, new cl_device_id[] {id}, null, null, error);
        OpenClCalls.check(error[0], "clCreateContext on " + device.describe());
        @SuppressWarnings("deprecation") // clCreateCommandQueueWithProperties is absent on OpenCL 1.x devices
        cl_command_queue created = CL.clCreateCommandQueue(context, id, 0, error);
        if (error[0] != CL.CL_SUCCESS) {
            CL.clReleaseContext(context);
            OpenClCalls.check(error[0], "clCreateCommandQueue on " + device.describe());
        }
        this.queue = created;
        this.completions = new EventCompletions(device.deviceName(), true);
        this.copies = new OpenClCopies(this, context, queue, settings.stagingBufferBytes());
        this.recordedWork = new EventCompletions(device.deviceName() + " (recorded work)", false);
        this.positions = new QueuePositions(this::marker, completions::wake);
        completions.onWake(positions::markUncovered);
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

    /** Whether a device version ("OpenCL &lt;major&gt;.&lt;minor&gt; &lt;vendor-specific&gt;") is at least the one given; 1.0 when unreadable. */
    static boolean openClVersionAtLeast(String version, int major, int minor) {
        int[] found = {1, 0};
        String[] words = version.split(" ");
        if (words.length >= 2) {
            try {
                String[] numbers = words[1].split("\\.");
                found = new int[] {Integer.parseInt(numbers[0]), Integer.parseInt(numbers[1])};
            } catch (RuntimeException unreadable) {
                // keep 1.0: every device has what 1.0 has
            }
        }
        return found[0] != major ? found[0] > major : found[1] >= minor;
    }

    // ---- what the device is -----------------------------------------------------------------------------------

    @Override
    public BackendInfo info() {
        return new BackendInfo(OpenClBackendProvider.NAME, deviceIndex, device.deviceName() + " (" + device.platformName() + ")", globalMemory);
    }

    /** The total is {@code CL_DEVICE_GLOBAL_MEM_SIZE}; free memory is -1: OpenCL has no portable query for it. */
    @Override
    public DeviceMemoryInfo memoryInfo() {
        return new DeviceMemoryInfo(-1, globalMemory);
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
            case UNIFIED -> unifiedSupport();
        };
    }

    private BackendAvailability unifiedSupport() {
        if ((svmCapabilities & CL_DEVICE_SVM_FINE_GRAIN_BUFFER) != 0) {
            return BackendAvailability.available("fine-grained buffer shared virtual memory (clSVMAlloc)");
        }
        if ((svmCapabilities & CL_DEVICE_SVM_COARSE_GRAIN_BUFFER) != 0) {
            return BackendAvailability.unavailable("UNIFIED memory needs fine-grained shared virtual memory, and OpenCL device "
                    + device.describe() + " has only coarse-grained SVM, which the host may touch only between map and unmap "
                    + "calls; use DEVICE (synced by the manager) or PINNED memory instead");
        }
        return BackendAvailability.unavailable("UNIFIED memory needs shared virtual memory (OpenCL 2.0 SVM), and OpenCL device "
                + device.describe() + " has none; use DEVICE (synced by the manager) or PINNED memory instead");
    }

    @Override
    public boolean hostAccessible(MemoryLocation location) {
        return location != MemoryLocation.DEVICE && supports(location).available();
    }

    /** {@code CL_DEVICE_MEM_BASE_ADDR_ALIGN} in bytes: sub-buffer origins must be multiples of it; allocation sizes are. */
    public long subBufferAlignment() {
        return alignment;
    }

    /** {@code CL_DEVICE_MAX_MEM_ALLOC_SIZE}: the largest single allocation. */
    public long maxAllocationBytes() {
        return maxAllocation;
    }

    /** {@code CL_DEVICE_MAX_MEM_ALLOC_SIZE} at every location but HOST, whose memory is the JVM's own. */
    @Override
    public long maxAllocationBytes(MemoryLocation location) {
        return location == MemoryLocation.HOST ? Long.MAX_VALUE : maxAllocation;
    }

    /** Whether the device has {@code cl_khr_fp64}, which the FLOAT64 ops need. */
    public boolean hasDoublePrecision() {
        return doublePrecision;
    }

    /** The context, for one's own kernels on this backend's buffers. */
    public cl_context context() {
        return context;
    }

    /** The in-order queue every copy and kernel of this backend goes through. */
    public cl_command_queue commandQueue() {
        return queue;
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
        return subBuffer(allocation, offset, bytes, CL_MEM_READ_WRITE);
    }

    /** As {@link #subBuffer(NativeAllocation, long, long)}, with the kernels' access in {@code accessFlags}. */
    cl_mem subBuffer(NativeAllocation allocation, long offset, long bytes, long accessFlags) {
        checkOpen();
        if (offset % alignment != 0) {
            throw new IllegalArgumentException("a sub-buffer's origin must be a multiple of " + alignment
                    + " bytes (CL_DEVICE_MEM_BASE_ADDR_ALIGN) on " + device.describe() + "; " + offset + " is not");
        }
        checkRange(allocation, offset, bytes);
        int[] error = new int[1];
        cl_mem sub = CL.clCreateSubBuffer(memObject(allocation), accessFlags, CL.CL_BUFFER_CREATE_TYPE_REGION,
                new cl_buffer_region(offset, bytes), error);
        OpenClCalls.check(error[0], "clCreateSubBuffer at offset " + offset + ", " + bytes + " bytes");
        return sub;
    }

    /**
     * A {@code CL_MEM_USE_HOST_PTR} buffer over {@code [offset, offset + bytes)} of host-accessible memory, for a
     * kernel on HOST or PINNED memory; release it with {@code clReleaseMemObject}. After a kernel writes it,
     * {@link #enqueuePublishToHost} makes the results visible in host memory.
     */
    cl_mem hostMemoryBuffer(NativeAllocation allocation, long offset, long bytes, long accessFlags) {
        checkOpen();
        checkRange(allocation, offset, bytes);
        MemorySegment host = allocation.hostSegment();
        if (host == null) {
            throw new IllegalArgumentException(allocation.location() + " memory on OpenCL is not host memory: " + allocation);
        }
        int[] error = new int[1];
        cl_mem wrapper = CL.clCreateBuffer(context, accessFlags | CL_MEM_USE_HOST_PTR, bytes, OpenClCalls.pointerAt(host.address() + offset), error);
        OpenClCalls.check(error[0], "clCreateBuffer(CL_MEM_USE_HOST_PTR) over " + bytes + " bytes of " + allocation.location() + " memory");
        return wrapper;
    }

    /**
     * Maps and unmaps a {@link #hostMemoryBuffer} once {@code after} are complete: an implementation that copied
     * the host memory for a kernel copies the results back then (on PoCL and integrated GPUs it costs nothing).
     */
    void enqueuePublishToHost(cl_mem buffer, long bytes, cl_event[] after, @Nullable cl_event unmapped) {
        int[] error = new int[1];
        ByteBuffer mapping = CL.clEnqueueMapBuffer(queue, buffer, false, CL_MAP_READ, 0, bytes, after.length, after.length == 0 ? null : after, null, error);
        OpenClCalls.check(error[0], "clEnqueueMapBuffer of " + bytes + " bytes of host memory after a kernel");
        OpenClCalls.check(CL.clEnqueueUnmapMemObject(queue, buffer, mapping, 0, null, unmapped), "clEnqueueUnmapMemObject after a kernel");
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
        checkRange(allocation, offset, bytes);
        return OpenClDeviceHandle.open(this, allocation, offset, bytes, mode);
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
        OpenClKernel kernel = OpenClKernel.build(this, source);
        synchronized (lifecycle) {
            if (!closed) {
                kernels.add(kernel);
                return kernel;
            }
        }
        kernel.release();
        throw new IllegalStateException("this OpenCL backend (" + device.describe() + ") closed while " + source + " was built");
    }

    /** The context, device and queue, for code that builds its own programs: see {@link OpenClNativeDevice}. */
    @Override
    public OpenClNativeDevice nativeDevice() {
        return nativeDevice;
    }

    /**
     * A future for the commands queued so far: a marker, which completes after every command before it on this
     * in-order queue. On a closed backend nothing is enqueued and the future is close's, which finishes the queue.
     */
    /** A marker on the queue after everything queued so far, flushed, for a wait list of the caller's; it releases it. */
    cl_event markerEvent() {
        synchronized (lifecycle) {
            checkOpen();
            cl_event marker = new cl_event();
            @SuppressWarnings("deprecation") // clEnqueueMarker is the OpenCL 1.0 and 1.1 form
            int code = markersTakeWaitLists ? CL.clEnqueueMarkerWithWaitList(queue, 0, null, marker) : CL.clEnqueueMarker(queue, marker);
            OpenClCalls.check(code, "clEnqueueMarker");
            OpenClCalls.check(CL.clFlush(queue), "clFlush");
            return marker;
        }
    }

    /**
     * A future for everything queued so far (flushed, so it starts), with no command or event of its own: it completes
     * once a marker queued after it has ended ({@link QueuePositions}). For kernels and device accesses, whose
     * failures their enqueue call reports.
     */
    CompletableFuture<Void> position() {
        synchronized (lifecycle) {
            if (closed) {
                return drained;
            }
            OpenClCalls.check(CL.clFlush(queue), "clFlush");
        }
        return positions.next();
    }

    /** As {@link #position()}, for a command whose event the caller made: released here. */
    CompletableFuture<Void> position(cl_event queued) {
        CL.clReleaseEvent(queued);
        return position();
    }

    CompletableFuture<Void> marker() {
        synchronized (lifecycle) {
            return closed ? drained : markerLocked();
        }
    }

    /**
     * As {@link #marker()}, after publishing a {@link #hostMemoryBuffer}'s contents to host memory once
     * {@code after} are complete. A failure to publish fails the future, once the marker has completed.
     */
    CompletableFuture<Void> publishToHostThenMarker(cl_mem buffer, long bytes, cl_event[] after) {
        synchronized (lifecycle) {
            if (closed) {
                return drained;
            }
            RuntimeException unpublished = null;
            try {
                enqueuePublishToHost(buffer, bytes, after, null);
            } catch (RuntimeException e) {
                unpublished = e;
            }
            CompletableFuture<Void> marked = markerLocked();
            RuntimeException failure = unpublished;
            return failure == null ? marked : marked.thenCompose(ignored -> CompletableFuture.failedFuture(failure));
        }
    }

    private CompletableFuture<Void> markerLocked() {
        cl_event marker = new cl_event();
        @SuppressWarnings("deprecation") // clEnqueueMarker is the OpenCL 1.0 and 1.1 form
        int code = markersTakeWaitLists ? CL.clEnqueueMarkerWithWaitList(queue, 0, null, marker) : CL.clEnqueueMarker(queue, marker);
        if (code != CL.CL_SUCCESS) {
            // nothing else would say when the queue is done with the memory: wait for it here rather than let it go early
            OpenClCalls.check(CL.clFinish(queue), "clFinish after clEnqueueMarker failed");
            return CompletableFuture.failedFuture(OpenClCalls.failure(code, "clEnqueueMarker"));
        }
        return track(marker, "a marker");
    }

    /**
     * A future for work queued on a queue of the user's own in this backend's context: retains {@code event}
     * (released once it completes) and flushes its queue, so the work starts. Waited for apart from this
     * backend's queue, in the order recorded: a future completes no earlier than its command, perhaps later.
     */
    CompletableFuture<Void> trackRecorded(cl_event event) {
        long[] owner = new long[1];
        OpenClCalls.check(CL.clGetEventInfo(event, CL_EVENT_CONTEXT, Sizeof.cl_context, Pointer.to(owner), null), "clGetEventInfo(CL_EVENT_CONTEXT)");
        if (owner[0] != context.getNativePointer()) {
            throw new IllegalArgumentException("this event belongs to another OpenCL context; record work queued on a queue of "
                    + "this backend's context (OpenClDeviceHandle.context()), where the handle's memory lives");
        }
        cl_command_queue itsQueue = new cl_command_queue();
        OpenClCalls.check(CL.clGetEventInfo(event, CL_EVENT_COMMAND_QUEUE, Sizeof.cl_command_queue, Pointer.to(itsQueue), null),
                "clGetEventInfo(CL_EVENT_COMMAND_QUEUE)");
        if (itsQueue.getNativePointer() != 0) { // a user event has no queue
            OpenClCalls.check(CL.clFlush(itsQueue), "clFlush of the recorded work's queue");
        }
        synchronized (lifecycle) {
            checkOpen();
            OpenClCalls.check(CL.clRetainEvent(event), "clRetainEvent");
            return recordedWork.completion(event, "work recorded on an OpenCL device handle");
        }
    }

    /**
     * Waits, at most {@code timeout}, for every command queued so far on this backend's queue (a marker, never an
     * unbounded {@code clFinish}) and every work recorded on a device handle; true when all of it has ended, failed
     * commands included. On a closed backend: whether close has finished them.
     */
    @Override
    public boolean awaitIdle(Duration timeout) {
        CompletableFuture<Void> idle;
        synchronized (lifecycle) {
            idle = closed ? drained : CompletableFuture.allOf(markerLocked(), recordedWork.barrier());
        }
        try {
            idle.get(Math.max(0, timeout.toNanos()), TimeUnit.NANOSECONDS);
            return true;
        } catch (ExecutionException failed) {
            return true; // a failed command has ended too: nothing runs on the memory any more
        } catch (TimeoutException e) {
            return false;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    // ---- allocation -------------------------------------------------------------------------------------------

    /** A fresh allocation of {@code sizeBytes} rounded up to {@link #subBufferAlignment()}. */
    @Override
    public NativeAllocation allocate(MemoryLocation location, long sizeBytes) {
        checkOpen();
        if (sizeBytes <= 0) {
            throw new IllegalArgumentException("allocation size must be positive: " + sizeBytes);
        }
        long size = Math.ceilDiv(sizeBytes, alignment) * alignment;
        if (location != MemoryLocation.HOST && size > maxAllocation) {
            throw new BackendOutOfMemoryException(location + " allocation of " + sizeBytes + " bytes is above the largest single "
                    + "allocation of " + device.describe() + ": " + maxAllocation + " bytes (CL_DEVICE_MAX_MEM_ALLOC_SIZE)");
        }
        return switch (location) {
            case DEVICE -> allocateDevice(size);
            case PINNED -> allocatePinned(size);
            case HOST -> allocateHost(size);
            case UNIFIED -> allocateUnified(size);
        };
    }

    private NativeAllocation allocateDevice(long size) {
        takeDeviceMemory(size);
        try {
            int[] error = new int[1];
            cl_mem memory = CL.clCreateBuffer(context, CL_MEM_READ_WRITE, size, null, error);
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
                    + " bytes of DEVICE buffers this backend holds past the " + globalMemory + " bytes of " + device.describe()
                    + " (CL_DEVICE_GLOBAL_MEM_SIZE)");
        }
    }

    private NativeAllocation allocatePinned(long size) {
        int[] error = new int[1];
        cl_mem memory = CL.clCreateBuffer(context, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, size, null, error);
        OpenClCalls.check(error[0], "clCreateBuffer(CL_MEM_ALLOC_HOST_PTR) of " + size + " bytes");
        ByteBuffer mapping = CL.clEnqueueMapBuffer(queue, memory, true, CL_MAP_READ | CL_MAP_WRITE, 0, size, 0, null, null, error);
        if (error[0] != CL.CL_SUCCESS || mapping == null) {
            CL.clReleaseMemObject(memory);
            OpenClCalls.check(error[0] != CL.CL_SUCCESS ? error[0] : CL.CL_MAP_FAILURE, "clEnqueueMapBuffer of " + size + " pinned bytes");
        }
        long address = OpenClCalls.addressOf(mapping);
        return new NativeAllocation(MemoryLocation.PINNED, address, size, MemorySegment.ofAddress(address).reinterpret(size),
                new PinnedBuffer(memory, mapping));
    }

    private NativeAllocation allocateHost(long size) {
        Arena arena = Arena.ofShared();
        try {
            MemorySegment segment = arena.allocate(size, Math.max(alignment, 64));
            return new NativeAllocation(MemoryLocation.HOST, segment.address(), size, segment, arena);
        } catch (OutOfMemoryError e) {
            arena.close();
            throw new BackendOutOfMemoryException("no host memory for " + size + " bytes", e);
        }
    }

    private NativeAllocation allocateUnified(long size) {
        BackendAvailability support = unifiedSupport();
        if (!support.available()) {
            throw new IllegalStateException(support.detail());
        }
        Pointer svm = CL.clSVMAlloc(context, CL_MEM_READ_WRITE | CL_MEM_SVM_FINE_GRAIN_BUFFER, size, (int) Math.min(alignment, 1 << 16));
        if (svm == null || svm.getNativePointer() == 0) {
            throw new BackendOutOfMemoryException("clSVMAlloc of " + size + " fine-grained bytes returned NULL on " + device.describe());
        }
        long address = svm.getNativePointer();
        return new NativeAllocation(MemoryLocation.UNIFIED, address, size, MemorySegment.ofAddress(address).reinterpret(size),
                new SharedVirtualMemory(svm, address));
    }

    /**
     * Gives the memory back. Buffers are released (OpenCL keeps one alive until the commands using it finish);
     * PINNED is unmapped first; SVM waits for the queue to drain, as {@code clSVMFree} does not. A free that
     * arrives after {@link #close()} released the queue and context releases what is left to release: the
     * buffer itself, or nothing for SVM, which went with its context.
     */
    @Override
    public void free(NativeAllocation allocation) {
        switch (allocation.handle()) {
            case cl_mem memory -> {
                OpenClCalls.check(CL.clReleaseMemObject(memory), "clReleaseMemObject");
                deviceBytes.giveBack(allocation.sizeBytes());
            }
            case PinnedBuffer pinned -> {
                synchronized (lifecycle) {
                    if (!released) {
                        OpenClCalls.check(CL.clEnqueueUnmapMemObject(queue, pinned.memory(), pinned.mapping(), 0, null, null), "clEnqueueUnmapMemObject");
                    }
                }
                OpenClCalls.check(CL.clReleaseMemObject(pinned.memory()), "clReleaseMemObject");
            }
            case Arena arena -> arena.close();
            case SharedVirtualMemory svm -> {
                synchronized (lifecycle) {
                    if (!released) {
                        OpenClCalls.check(CL.clFinish(queue), "clFinish before clSVMFree");
                        CL.clSVMFree(context, svm.pointer());
                    }
                }
            }
            case null, default -> throw new IllegalArgumentException("not an allocation of this backend: " + allocation);
        }
    }

    // ---- copies ---------------------------------------------------------------------------------------------

    @Override
    public void copyToDevice(MemorySegment source, NativeAllocation target, long targetOffset, long bytes) {
        checkOpen();
        checkRange(target, targetOffset, bytes);
        copies.toDevice(source, target, targetOffset, bytes);
    }

    @Override
    public void copyToHost(NativeAllocation source, long sourceOffset, MemorySegment target, long bytes) {
        checkOpen();
        checkRange(source, sourceOffset, bytes);
        copies.toHost(source, sourceOffset, target, bytes);
    }

    @Override
    public void copyWithinDevice(NativeAllocation source, long sourceOffset, NativeAllocation target, long targetOffset, long bytes) {
        checkOpen();
        checkRange(source, sourceOffset, bytes);
        checkRange(target, targetOffset, bytes);
        copies.withinDevice(source, sourceOffset, target, targetOffset, bytes);
    }

    @Override
    public CompletableFuture<Void> copyToDeviceAsync(MemorySegment source, NativeAllocation target, long targetOffset, long bytes) {
        checkOpen();
        checkRange(target, targetOffset, bytes);
        return copies.toDeviceQueued(source, target, targetOffset, bytes);
    }

    @Override
    public CompletableFuture<Void> copyToHostAsync(NativeAllocation source, long sourceOffset, MemorySegment target, long bytes) {
        checkOpen();
        checkRange(source, sourceOffset, bytes);
        return copies.toHostQueued(source, sourceOffset, target, bytes);
    }

    // ---- what the kernel ops use --------------------------------------------------------------------------------

    @Override
    public KernelOps ops() {
        checkOpen();
        return ops;
    }

    /**
     * Every command of this backend goes through its one in-order queue, so work of the backend's (copies, ops, a device
     * access's marker) needs no ordering; work a handle recorded from a queue of the user's own gets a barrier with its
     * event on this queue. Other futures are waited for on the host.
     */
    @Override
    public boolean orderAfter(CompletableFuture<?> work) {
        if (work.isDone() || onQueue(work)) {
            return true;
        }
        synchronized (lifecycle) {
            checkOpen();
            return work instanceof EventCompletions.EventWork events && events.orderQueue(queue);
        }
    }

    /** Work on this backend's one in-order queue completes in the order it was queued. */
    @Override
    public boolean supersedes(CompletableFuture<?> later, CompletableFuture<?> earlier) {
        return onQueue(later) && onQueue(earlier);
    }

    private static boolean onQueue(CompletableFuture<?> work) {
        return work instanceof QueuePositions.Position || work instanceof EventCompletions.EventWork events && events.onBackendQueue();
    }

    OpenClDevice device() {
        return device;
    }

    int computeUnits() {
        return computeUnits;
    }

    /** Flushes the queue so the command starts, and returns a future for its event. */
    CompletableFuture<Void> track(cl_event event, String what) {
        OpenClCalls.check(CL.clFlush(queue), "clFlush");
        return completions.completion(event, what);
    }

    void checkOpen() {
        if (closed) {
            throw new IllegalStateException("this OpenCL backend (" + device.describe() + ") is closed");
        }
    }

    private static void checkRange(NativeAllocation allocation, long offset, long bytes) {
        if (offset < 0 || bytes < 0 || offset > allocation.sizeBytes() - bytes) {
            throw new IndexOutOfBoundsException("range [" + offset + ", " + offset + " + " + bytes + ") is outside the "
                    + allocation.sizeBytes() + "-byte " + allocation.location() + " allocation");
        }
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

    void close(Duration deviceWait) {
        CompletableFuture<Void> idle;
        synchronized (lifecycle) {
            if (closed) {
                return;
            }
            idle = CompletableFuture.allOf(markerLocked(), recordedWork.barrier());
            closed = true;
        }
        if (!finishedWithin(idle, deviceWait)) {
            System.getLogger(OpenClBackend.class.getName()).log(System.Logger.Level.WARNING, "OpenCL device " + device.describe()
                    + ": queued or recorded work did not finish within " + deviceWait.toMillis() + " ms of close; the backend"
                    + " keeps its queue and context rather than release them under it (the device may be hung)");
            return;
        }
        try {
            CL.clFinish(queue);
        } finally {
            completions.close();
            recordedWork.close();
            synchronized (lifecycle) {
                released = true;
                ops.release();
                kernels.forEach(OpenClKernel::release);
                CL.clReleaseCommandQueue(queue);
                CL.clReleaseContext(context);
            }
            drained.complete(null);
        }
    }

    private static boolean finishedWithin(CompletableFuture<Void> work, Duration bound) {
        try {
            work.get(Math.max(0, bound.toNanos()), TimeUnit.NANOSECONDS);
            return true;
        } catch (ExecutionException failed) {
            return true; // a failed command has ended too
        } catch (TimeoutException e) {
            return false;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }
}
