package dev.compute.memory.cuda;

import static dev.compute.memory.cuda.DriverCalls.cuDeviceGetAttribute;
import static dev.compute.memory.cuda.DriverCalls.cuDeviceTotalMem;
import static dev.compute.memory.cuda.DriverCalls.cuMemGetInfo;

import dev.compute.memory.AccessMode;
import dev.compute.memory.BackendInfo;
import dev.compute.memory.DeviceMemoryInfo;
import dev.compute.memory.InvalidSettingException;
import dev.compute.memory.KernelSource;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.internal.HostPages;
import dev.compute.memory.spi.BackendAvailability;
import dev.compute.memory.spi.BackendSettings;
import dev.compute.memory.spi.ComputeBackend;
import dev.compute.memory.spi.KernelOps;
import dev.compute.memory.spi.NativeAllocation;
import dev.compute.memory.spi.NativeKernel;
import dev.compute.memory.spi.VirtualMemory;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import jcuda.driver.CUdevice_attribute;
import jcuda.driver.CUstream;
import org.jspecify.annotations.Nullable;

/**
 * One CUDA device, on its primary context, for any number of threads.
 *
 * <p>Locations: DEVICE is {@code cuMemAlloc} memory, or pages mapped into reserved ranges through
 * {@link #virtualMemory} for expandable segments; PINNED is {@code cuMemHostAlloc} memory (portable, mapped into
 * the device's address space), UNIFIED is {@code cuMemAllocManaged} memory, both host-accessible; HOST is
 * ordinary off-heap memory, which kernels cannot reach ({@link CudaAllocator}).
 *
 * <p>Streams: each thread works on one of a few non-blocking streams ({@code streams} option, 4 by default),
 * picked by thread id, so one thread's copies and kernels run in the order it issued them while other threads'
 * work overlaps. Synchronous calls wait for an event behind their own work only. Futures complete when the
 * device is done ({@link DeviceCompletions}). {@link CudaStreams} holds the streams and whether the backend is open.
 *
 * <p>Native handles: a device access gets a {@link CudaDeviceHandle} (pointer and stream) for DEVICE, PINNED and
 * UNIFIED memory; HOST memory is refused. One's own kernels are PTX, loaded by {@link #compileKernel} for
 * {@code manager.kernels()} ({@link CudaKernel}) and launched on the calling thread's stream; {@link #nativeDevice()}
 * gives the context, device and stream to code that builds its own. {@link #awaitIdle} waits, bounded, for an event behind the work on every
 * stream.
 *
 * <p>Copies: between device, pinned and managed memory, the driver copies directly ({@code cuMemcpyAsync},
 * under unified addressing). Ordinary Java memory (heap arrays, pageable segments) is staged through pinned
 * buffers ({@link StagingBuffers}). A copy to the device from pageable memory returns once its last chunk is
 * queued, as {@code cudaMemcpyAsync} from pageable memory does; a copy to pageable memory waits for the
 * device, because the host finishes it; its future is complete when returned.
 *
 * <p>Options ({@link dev.compute.memory.UnifiedMemoryManagerBuilder#backendOption}): {@code streams} (4),
 * {@code staging-lanes}: staged copies that may run at once (2), {@code staging-buffers}: buffers per staged
 * copy, at least 2 (2), {@code copy-threads}: host threads per staged chunk (up to 4).
 *
 * <p>Close: the primary context is released unless page-locked or managed allocations are still live, or a device
 * access is still open (see {@link #close()}).
 */
public final class CudaBackend implements ComputeBackend {

    public static final String NAME = "cuda";

    private static final System.Logger LOG = System.getLogger(CudaBackend.class.getName());

    private final BackendSettings settings;
    private final CudaContext context;
    private final BackendInfo info;
    /** Whether UNIFIED is offered, and if not, why: see {@link #unifiedMemory}. */
    private final BackendAvailability unified;
    private final @Nullable CudaVirtualMemory virtualMemory;
    private final DeviceCompletions completions;
    private final HostCopier copier;
    private final StagingBuffers staging;
    private final CudaStreams streams;
    private final CudaAllocator allocator;
    private final CudaKernelOps ops;
    private final CudaCopies copies;
    /** One's own kernels loaded on this backend, unloaded by close(). */
    private final Set<CudaKernel> kernels = ConcurrentHashMap.newKeySet();
    private final CudaNativeDevice nativeDevice = new CudaNativeDevice(this);

    CudaBackend(DriverLibrary driver, BackendSettings settings) {
        this.settings = settings;
        this.context = new CudaContext(driver, settings.deviceIndex());
        DeviceCompletions startedCompletions = null;
        HostCopier startedCopier = null;
        CudaVirtualMemory startedVmm = null;
        try {
            long[] total = new long[1];
            CudaResults.check(cuDeviceTotalMem(total, context.device), "cuDeviceTotalMem");
            this.info = new BackendInfo(NAME, settings.deviceIndex(), driver.deviceName(context.deviceId), total[0]);
            this.unified = unifiedMemory(info.deviceName(), attribute(CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY) != 0,
                    attribute(CUdevice_attribute.CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS) != 0);
            startedVmm = attribute(CUdevice_attribute.CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED) != 0
                    ? new CudaVirtualMemory(context) : null;
            this.virtualMemory = startedVmm;
            startedCompletions = new DeviceCompletions(context, settings.deviceWaitTimeout());
            this.completions = startedCompletions;
            int copyThreads = option(settings, "copy-threads", Math.min(4, Runtime.getRuntime().availableProcessors()), 1, MAX_COPY_THREADS);
            startedCopier = new HostCopier(copyThreads, "compute-cuda-" + settings.deviceIndex() + "-copy-");
            this.copier = startedCopier;
            this.staging = new StagingBuffers(context, settings.stagingBufferBytes(), option(settings, "staging-buffers", 2, StagingBuffers.MIN_SLOTS, MAX_STAGING),
                    option(settings, "staging-lanes", 2, 1, MAX_STAGING), settings.pinningEnabled());
            this.streams = new CudaStreams(context, completions, option(settings, "streams", 4, 1, MAX_STREAMS));
            this.allocator = new CudaAllocator(context);
            this.ops = new CudaKernelOps(this);
            this.copies = new CudaCopies(streams, allocator, completions, copier, staging);
        } catch (RuntimeException | Error e) {
            closeAfterFailedStart(e, startedCompletions == null ? null : startedCompletions::close,
                    startedCopier == null ? null : startedCopier::close, startedVmm == null ? null : startedVmm::close, context::close);
            throw e;
        }
    }

    /**
     * Closes what a failed start had made, each part whatever the others do (a part left open would keep its threads,
     * structs or the context's reference for good); their failures are added to {@code failure}, the one to throw.
     */
    private static void closeAfterFailedStart(Throwable failure, @Nullable Runnable... parts) {
        for (Runnable part : parts) {
            if (part == null) {
                continue;
            }
            try {
                part.run();
            } catch (RuntimeException | Error closing) {
                failure.addSuppressed(closing);
            }
        }
    }

    /**
     * The most streams the {@code streams} option may ask for: their table is made at start, one entry each, and
     * streams beyond the threads that call in gain nothing.
     */
    static final int MAX_STREAMS = 1024;

    /**
     * The most pinned staging buffers per staged copy, and staged copies at once: each buffer is
     * {@code staging-buffer-size} of pinned memory, which the operating system cannot page out.
     */
    static final int MAX_STAGING = 64;

    /** The most host threads filling one staging buffer: more than the cores of any host only take turns. */
    static final int MAX_COPY_THREADS = 256;

    static int option(BackendSettings settings, String key, int defaultValue) {
        return option(settings, key, defaultValue, 1);
    }

    /** A whole-number backend option of at least {@code minimum}, or its default. */
    static int option(BackendSettings settings, String key, int defaultValue, int minimum) {
        return option(settings, key, defaultValue, minimum, Integer.MAX_VALUE);
    }

    /** A whole-number backend option from {@code minimum} to {@code maximum}, or its default. */
    static int option(BackendSettings settings, String key, int defaultValue, int minimum, int maximum) {
        String value = settings.option(key);
        if (value == null) {
            return defaultValue;
        }
        String allowed = maximum < Integer.MAX_VALUE ? "a whole number from " + minimum + " to " + maximum
                : minimum == 1 ? "a positive whole number" : "a whole number of at least " + minimum;
        try {
            int parsed = Integer.parseInt(value.trim());
            if (parsed < minimum || parsed > maximum) {
                throw new InvalidSettingException(key + " (an option of the cuda backend)", value, allowed);
            }
            return parsed;
        } catch (NumberFormatException e) {
            throw new InvalidSettingException(key + " (an option of the cuda backend)", value, allowed);
        }
    }

    /**
     * UNIFIED memory is host-accessible, so it is offered only where the host may touch it while kernels run: without
     * concurrent managed access (a GPU before Pascal; Windows and WSL with any GPU) the GPU holds every managed
     * allocation alone while any kernel runs, and a host read or write then faults (CUDA Programming Guide, "GPU
     * Exclusive Access To Managed Memory"): a host view of a UNIFIED buffer while another thread's kernel runs would end
     * the process.
     */
    private static BackendAvailability unifiedMemory(String deviceName, boolean managedMemory, boolean concurrentManagedAccess) {
        if (!managedMemory) {
            return BackendAvailability.unavailable(deviceName + " does not support managed memory");
        }
        if (!concurrentManagedAccess) {
            return BackendAvailability.unavailable(deviceName + " has no concurrent managed access (a GPU before Pascal, or"
                    + " Windows or WSL): the GPU holds managed memory alone while any kernel runs, and a host access to it then"
                    + " faults; use PINNED, or DEVICE with copies");
        }
        return BackendAvailability.available("managed memory (cuMemAllocManaged)");
    }

    private int attribute(int attribute) {
        int[] value = new int[1];
        CudaResults.check(cuDeviceGetAttribute(value, attribute, context.device), "cuDeviceGetAttribute(" + attribute + ")");
        return value[0];
    }

    // ---- what every entry point does first ------------------------------------------------------------------------

    /** Checks the backend is open, makes the context current and returns this thread's stream. */
    CUstream enter() {
        return streams.enter();
    }

    /**
     * Orders this thread's stream after {@code work} on the device: nothing to do for work of the same stream, else
     * {@code cuStreamWaitEvent} on the event recorded behind it. Futures this backend did not make are waited for on the host.
     */
    @Override
    public boolean orderAfter(CompletableFuture<?> work) {
        return streams.orderAfter(work);
    }

    /** Work on one stream completes in the order it was queued. */
    @Override
    public boolean supersedes(CompletableFuture<?> later, CompletableFuture<?> earlier) {
        return CudaStreams.supersedes(later, earlier);
    }

    /** The streams and whether the backend is open: where device handles and kernels record their work. */
    CudaStreams streams() {
        return streams;
    }

    DeviceCompletions completions() {
        return completions;
    }

    // ---- device facts ---------------------------------------------------------------------------------------------

    @Override
    public BackendInfo info() {
        return info;
    }

    @Override
    public DeviceMemoryInfo memoryInfo() {
        streams.requireOpen();
        context.makeCurrent();
        long[] free = new long[1];
        long[] total = new long[1];
        CudaResults.check(cuMemGetInfo(free, total), "cuMemGetInfo");
        return new DeviceMemoryInfo(free[0], total[0]);
    }

    @Override
    public MemoryLocation defaultLocation() {
        return MemoryLocation.DEVICE;
    }

    @Override
    public BackendAvailability supports(MemoryLocation location) {
        return switch (location) {
            case DEVICE, HOST -> BackendAvailability.available(location + " memory");
            case PINNED -> settings.pinningEnabled()
                    ? BackendAvailability.available("page-locked host memory (cuMemHostAlloc)")
                    : BackendAvailability.unavailable("pinning is disabled (compute.memory.pinning.enabled=false)");
            case UNIFIED -> unified;
        };
    }

    @Override
    public boolean hostAccessible(MemoryLocation location) {
        return location != MemoryLocation.DEVICE;
    }

    @Override
    public Optional<VirtualMemory> virtualMemory(MemoryLocation location) {
        return location == MemoryLocation.DEVICE && virtualMemory != null ? Optional.of(virtualMemoryCalls) : Optional.empty();
    }

    /**
     * The virtual memory's calls, each run under the streams' lifecycle (whileOpen) as allocations are: the close waits
     * for one under way before it releases the context and frees the structs it passes the driver, and refuses them
     * from then on.
     */
    private final VirtualMemory virtualMemoryCalls = new VirtualMemory() {
        @Override
        public long granularity() {
            return Objects.requireNonNull(virtualMemory).granularity();
        }

        @Override
        public NativeAllocation reserve(long sizeBytes) {
            return streams.whileOpen(() -> Objects.requireNonNull(virtualMemory).reserve(sizeBytes));
        }

        @Override
        public void map(NativeAllocation range, long offset, long length) {
            streams.whileOpen(() -> {
                Objects.requireNonNull(virtualMemory).map(range, offset, length);
                return null;
            });
        }

        @Override
        public void unmap(NativeAllocation range, long offset, long length) {
            streams.whileOpen(() -> {
                Objects.requireNonNull(virtualMemory).unmap(range, offset, length);
                return null;
            });
        }

        @Override
        public void release(NativeAllocation range) {
            streams.whileOpen(() -> {
                Objects.requireNonNull(virtualMemory).release(range);
                return null;
            });
        }
    };

    // ---- allocation -----------------------------------------------------------------------------------------------

    @Override
    public NativeAllocation allocate(MemoryLocation location, long sizeBytes) {
        if (sizeBytes <= 0) {
            throw new IllegalArgumentException("an allocation needs a positive size: " + sizeBytes + " bytes");
        }
        BackendAvailability supported = supports(location);
        if (!supported.available()) {
            throw new IllegalArgumentException(location + " memory is not available on " + info.deviceName() + ": " + supported.detail());
        }
        // a call the close waits for: it must not release the context, and judge what memory is live, under a new allocation
        return streams.whileOpen(() -> allocator.allocate(location, sizeBytes));
    }

    /** HOST memory is {@code malloc}ed: its pages can go back; the device's, pinned and shared memory's do not. */
    @Override
    public long discardPages(NativeAllocation allocation, long offset, long bytes) {
        return allocation.location() == MemoryLocation.HOST ? HostPages.discard(allocation.address() + offset, bytes) : 0;
    }

    @Override
    public void free(NativeAllocation allocation) {
        // not whileOpen: device work's callbacks give memory back while close waits for that work
        streams.whileNotClosed(() -> allocator.free(allocation));
    }

    // ---- copies ---------------------------------------------------------------------------------------------------

    // Each copy runs under the streams' lifecycle read lock (whileOpen): close frees the staging buffers and destroys
    // the streams and events a copy uses, so it must not begin while one is under way.

    @Override
    public void copyToDevice(MemorySegment source, NativeAllocation target, long targetOffset, long bytes) {
        streams.whileOpen(() -> copies.toDevice(source, target, targetOffset, bytes, CudaCopies.Completion.WAIT));
    }

    @Override
    public CompletableFuture<Void> copyToDeviceAsync(MemorySegment source, NativeAllocation target, long targetOffset, long bytes) {
        return streams.whileOpen(() -> copies.toDevice(source, target, targetOffset, bytes, CudaCopies.Completion.QUEUE));
    }

    @Override
    public void copyToHost(NativeAllocation source, long sourceOffset, MemorySegment target, long bytes) {
        streams.whileOpen(() -> copies.toHost(source, sourceOffset, target, bytes, CudaCopies.Completion.WAIT));
    }

    @Override
    public CompletableFuture<Void> copyToHostAsync(NativeAllocation source, long sourceOffset, MemorySegment target, long bytes) {
        return streams.whileOpen(() -> copies.toHost(source, sourceOffset, target, bytes, CudaCopies.Completion.QUEUE));
    }

    @Override
    public void copyWithinDevice(NativeAllocation source, long sourceOffset, NativeAllocation target, long targetOffset, long bytes) {
        streams.whileOpen(() -> {
            copies.withinDevice(source, sourceOffset, target, targetOffset, bytes);
            return null;
        });
    }

    // ---- native handles -------------------------------------------------------------------------------------------

    /** Why HOST memory has no handle: said by a device access, and by a launch before it opens any. */
    static final String HOST_REFUSED = "HOST memory is ordinary off-heap memory, which a CUDA kernel cannot reach: allocate the "
            + "buffer in DEVICE, PINNED or UNIFIED memory for a kernel, or use a host access (hostAccess) to work on it from Java";

    /**
     * The device pointer and this thread's stream for {@code bytes} at {@code offset} of {@code allocation}, with the
     * context made current on the calling thread (the one that opens the access). HOST memory is refused: it is
     * ordinary off-heap memory, which no kernel can address.
     */
    @Override
    public CudaDeviceHandle openDeviceHandle(NativeAllocation allocation, long offset, long bytes, AccessMode mode) {
        if (allocation.location() == MemoryLocation.HOST) {
            throw new IllegalArgumentException(HOST_REFUSED);
        }
        Checks.range(allocation, offset, bytes, "access");
        CUstream stream = streams.openHandle(); // never a stream made after close destroyed the others
        return new CudaDeviceHandle(streams, allocation.address() + offset, bytes, stream, settings.deviceIndex());
    }

    /**
     * Records an event on every stream made so far and waits, at most {@code timeout}, until all have completed;
     * false when the time ran out first (or the thread was interrupted). Never an unbounded synchronize: see
     * {@link CudaStreams#awaitIdle}.
     */
    @Override
    public boolean awaitIdle(Duration timeout) {
        return streams.awaitIdle(timeout);
    }

    // ---- kernels --------------------------------------------------------------------------------------------------

    @Override
    public KernelOps ops() {
        return ops;
    }

    /** Loads a PTX resource into this device's context (the tests' own kernels). */
    PtxModule loadModule(String resource) {
        streams.requireOpen();
        context.makeCurrent();
        return new PtxModule(resource);
    }

    /** One's own kernels are PTX ({@link KernelSource#ptx}). */
    @Override
    public Set<KernelSource.Language> kernelLanguages() {
        return Set.of(KernelSource.Language.PTX);
    }

    /** Loads a PTX kernel into this device's primary context: see {@link CudaKernel}. Unloaded when the backend closes. */
    @Override
    public NativeKernel compileKernel(KernelSource source) {
        if (source.language() != KernelSource.Language.PTX) {
            throw new UnsupportedOperationException("the cuda backend loads PTX kernels (KernelSource.ptx), not " + source);
        }
        return streams.whileOpen(() -> {
            context.makeCurrent();
            CudaKernel kernel = CudaKernel.load(streams, source, settings.deviceIndex());
            kernels.add(kernel);
            return kernel;
        });
    }

    /** The context, device and the calling thread's stream: see {@link CudaNativeDevice}. */
    @Override
    public CudaNativeDevice nativeDevice() {
        return nativeDevice;
    }

    /** The primary context, made current on the calling thread; for {@link CudaNativeDevice}. */
    ContextHandle currentContext() {
        streams.requireOpen();
        context.makeCurrent();
        return context.handle();
    }

    CudaContext context() {
        return context;
    }

    int deviceOrdinal() {
        return settings.deviceIndex();
    }

    // ---- shutdown -------------------------------------------------------------------------------------------------

    /**
     * Waits for recorded device work (whose callbacks may still give memory back, so the backend stays open for
     * them), then frees staging, kernels and streams, and releases the context reference. The pool freed its
     * segments first, except memory the manager kept because a thread might still reach it: if PINNED or UNIFIED
     * allocations are still live, the context reference is kept (releasing the last one resets the context, which
     * unmaps that host memory under the threads) and a warning says so; while a device access is still open, its
     * holder may queue work on its stream and memory, so the streams and the context are kept. The wait for recorded work is bounded: on a
     * device that does not finish it within {@link #DEVICE_WAIT_AT_CLOSE}, the backend keeps its streams, staging
     * buffers, kernels and context (destroying them under running work could crash the device's users) and says so.
     */
    @Override
    public void close() {
        close(DEVICE_WAIT_AT_CLOSE);
    }

    /** How long close() waits for recorded device work before it keeps what that work may use. */
    static final Duration DEVICE_WAIT_AT_CLOSE = Duration.ofSeconds(10);

    @Override
    public synchronized void close(Duration deviceWait) {
        if (!streams.beginClose()) {
            return;
        }
        long deadline = System.nanoTime() + Math.min(deviceWait.toMillis(), Long.MAX_VALUE / 4_000_000L) * 1_000_000L;
        if (!streams.awaitCallsEnded(deviceWait)) {
            // a copy, op or launch is still inside the backend (waiting for the device, or a long staged copy): it
            // uses staging buffers, streams and events, so nothing is freed; the work it recorded is not waited for
            streams.markClosed();
            LOG.log(System.Logger.Level.WARNING, "CUDA device " + settings.deviceIndex() + ": a call into the backend was still"
                    + " under way " + deviceWait.toMillis() + " ms after close began; the backend keeps its streams, staging"
                    + " buffers, kernels and context rather than free them under it");
            return;
        }
        context.makeCurrent();
        boolean finished = completions.close(Duration.ofNanos(Math.max(0, deadline - System.nanoTime())));
        streams.markClosed();
        if (!finished) {
            if (!completions.closeOutlivedByAnAction()) { // that one the completions told of: the device was done
                LOG.log(System.Logger.Level.WARNING, "CUDA device " + settings.deviceIndex() + ": recorded device work did not finish"
                        + (deviceWait.isZero() ? " before the manager's close timeout ran out" : " within " + deviceWait.toMillis() + " ms of close")
                        + "; the backend keeps its streams, staging buffers, kernels"
                        + " and context rather than destroy them under it (the device may be hung)");
            }
            copier.close();
            return;
        }
        if (!streams.awaitFreesEnded(Duration.ofNanos(Math.max(0, deadline - System.nanoTime())))) {
            // a free that began before markClosed is still in the driver: releasing the context would reset it under that call
            LOG.log(System.Logger.Level.WARNING, "CUDA device " + settings.deviceIndex() + ": a free was still under way "
                    + deviceWait.toMillis() + " ms after close began; the backend keeps its streams and context rather than"
                    + " release them under it");
            copier.close();
            return;
        }
        copier.close();
        staging.close();
        ops.close();
        kernels.forEach(CudaKernel::unload);
        if (streams.openHandles() > 0 && (allocator.holdsMemory() || virtualMemory != null && virtualMemory.holdsRanges())) {
            // the manager closes its backend under an access held past its close timeout, keeping the access's memory:
            // releasing the context would free that device memory, and destroying the streams the one the holder queues on.
            // (A handle whose memory all went back reaches nothing: the manager's close ended its access itself and freed
            // the memory, and does not end handles then, DeviceHandle.end.)
            LOG.log(System.Logger.Level.WARNING, "CUDA device " + settings.deviceIndex() + ": " + streams.openHandles() + " device"
                    + " access(es) still open at close; the backend keeps its streams and context, and so the memory the"
                    + " accesses reach, rather than free them under their holders. They go back with the process.");
            return;
        }
        streams.destroy();
        if (virtualMemory != null) {
            virtualMemory.close();
        }
        releaseContextUnlessHostMemoryIsLive();
    }

    private void releaseContextUnlessHostMemoryIsLive() {
        CudaAllocator.LiveHostMemory live = allocator.liveHostMemory();
        if (live.allocations() == 0) {
            context.close();
            return;
        }
        LOG.log(System.Logger.Level.WARNING, "CUDA backend (device " + settings.deviceIndex() + ") closed with " + live.allocations()
                + " PINNED or UNIFIED allocation(s) of " + live.bytes() + " bytes in all still live, which a thread may still reach "
                + "(the manager keeps memory when a view or access is still open at its close timeout). The backend keeps its "
                + "reference to the device's primary context instead of releasing it: releasing the last reference resets the "
                + "context, which would unmap that memory under the thread. Memory and context go back with the process.");
    }

    @Override
    public String toString() {
        return "CudaBackend[" + info + "]";
    }
}
