package dev.compute.memory.cpu;

import dev.compute.memory.BackendInfo;
import dev.compute.memory.DeviceMemoryInfo;
import dev.compute.memory.KernelSource;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.internal.HostPages;
import dev.compute.memory.spi.BackendAvailability;
import dev.compute.memory.spi.BackendOutOfMemoryException;
import dev.compute.memory.spi.BackendSettings;
import dev.compute.memory.spi.ComputeBackend;
import dev.compute.memory.spi.HostKernelOps;
import dev.compute.memory.spi.JavaKernels;
import dev.compute.memory.spi.KernelArgument;
import dev.compute.memory.spi.KernelOps;
import dev.compute.memory.spi.NativeAllocation;
import dev.compute.memory.spi.NativeKernel;
import dev.compute.memory.spi.VirtualMemory;
import java.lang.foreign.MemorySegment;
import java.util.EnumMap;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The CPU as a compute device: host memory from the C library and the kernel, reached through the FFM API.
 *
 * <p><b>One memory.</b> HOST, DEVICE, UNIFIED and PINNED are all ordinary host memory here: every location is
 * host-accessible, so a {@code UnifiedBuffer} has one copy, its syncs do nothing and its host views are the
 * memory itself. The "host to device" and "device to host" copies below exist only for data coming from or
 * going to memory outside the manager (Java arrays, other segments); nothing is ever copied between a host
 * and a device copy of one buffer, because there is none.
 *
 * <p><b>Allocation.</b> Below {@value #MAPPED_THRESHOLD} bytes: {@code posix_memalign} with 64-byte alignment
 * (a cache line, and enough for any vector load), freed with {@code free}. From there up: an anonymous
 * {@code mmap} of whole pages, freed with {@code munmap}, so the pool's trims give memory straight back to the
 * OS instead of to the C library's heap. Each allocation is freed on its own, exactly; contents start
 * undefined. When the C library or the kernel has no memory, or the allocation would take what the process's CPU
 * backends hold past the machine's memory and swap ({@link HostMemoryLedger}; Linux would grant it and end the
 * process when it is touched): {@link BackendOutOfMemoryException}.
 *
 * <p><b>PINNED</b> is mapped pages locked with {@code mlock}. Locked memory is capped per process by
 * {@code RLIMIT_MEMLOCK} ({@code ulimit -l}; often 8 MiB, lifted by the {@code IPC_LOCK} capability). When the
 * kernel refuses the lock, the default is to keep the pages unlocked and log one warning with the reason: on
 * this backend nothing reads PINNED memory by DMA, so only the guarantee against swapping is lost, and code
 * written for a GPU keeps working. With the option {@code pinned-fallback=fail} the refusal is a
 * {@link BackendOutOfMemoryException} that names the limit (the pool then gives its cached pinned memory back
 * and retries once).
 *
 * <p><b>Page mapping</b> for expandable segments: see {@link CpuVirtualMemory}; offered at every location but
 * PINNED (locked memory is scarce; the pinned pool keeps whole segments). Mapped pages count in the ledger, and the
 * kernel charges them as it charges a plain {@code mmap}, so a mapping is refused where an allocation of its size
 * would be, with the same message.
 *
 * <p>Thread-safe. Freeing an address this backend did not hand out, or freeing twice, fails with an
 * {@link IllegalArgumentException} instead of corrupting the C library's heap.
 */
public final class CpuBackend implements ComputeBackend {

    private static final System.Logger LOG = System.getLogger(CpuBackend.class.getName());

    /** Allocations from this size up are whole pages from {@code mmap}; below, {@code posix_memalign}. */
    static final long MAPPED_THRESHOLD = 256L << 10;
    static final long ALIGNMENT = 64;

    /** How an allocation was made, and so how it is freed: the {@link NativeAllocation#handle()}. */
    enum Origin {
        /** {@code posix_memalign}; freed with {@code free}. */
        MALLOC,
        /** Anonymous {@code mmap}; freed with {@code munmap}. */
        MAPPED,
        /** Anonymous {@code mmap} locked with {@code mlock}; {@code munmap} unlocks and frees. */
        LOCKED,
        /** An address range reserved by {@link CpuVirtualMemory}; given back through it. */
        RESERVED
    }

    private final BackendSettings settings;
    private final CpuBackendOptions options;
    private final PageLocker locker;
    private final HostMemoryLedger ledger;
    private final long pageSize;
    private final BackendInfo info;
    private final HostKernelOps ops = new HostKernelOps();
    private final Map<MemoryLocation, CpuVirtualMemory> virtualMemory = new EnumMap<>(MemoryLocation.class);
    private final Map<Long, NativeAllocation> live = new ConcurrentHashMap<>();
    private final AtomicLong lockedBytes = new AtomicLong();
    private final AtomicBoolean warnedUnlocked = new AtomicBoolean();
    private final AtomicLong unlockedPinnedAllocations = new AtomicLong();
    private volatile boolean closed;

    /** Opens the backend; throws {@link dev.compute.memory.InvalidSettingException} for a bad option. */
    public CpuBackend(BackendSettings settings) {
        this(settings, PageLocker.MLOCK, HostMemoryLedger.PROCESS);
    }

    CpuBackend(BackendSettings settings, PageLocker locker) {
        this(settings, locker, HostMemoryLedger.PROCESS);
    }

    CpuBackend(BackendSettings settings, PageLocker locker, HostMemoryLedger ledger) {
        this.settings = settings;
        this.ledger = ledger;
        this.pageSize = Posix.pageSize();
        this.options = CpuBackendOptions.from(settings, pageSize);
        this.locker = locker;
        int processors = Runtime.getRuntime().availableProcessors();
        this.info = new BackendInfo(CpuBackendProvider.NAME, settings.deviceIndex(),
                LinuxHost.processorName() + " (" + processors + " processors)", LinuxHost.memory().totalBytes());
        for (MemoryLocation location : MemoryLocation.values()) {
            if (location != MemoryLocation.PINNED) {
                virtualMemory.put(location, new CpuVirtualMemory(location, options.pageMappingGranularity(), ledger));
            }
        }
    }

    @Override
    public BackendInfo info() {
        return info;
    }

    /** MemAvailable and MemTotal from {@code /proc/meminfo}, capped by the container's memory limit where that is lower. */
    @Override
    public DeviceMemoryInfo memoryInfo() {
        return LinuxHost.memory();
    }

    @Override
    public MemoryLocation defaultLocation() {
        return MemoryLocation.HOST;
    }

    @Override
    public BackendAvailability supports(MemoryLocation location) {
        if (location != MemoryLocation.PINNED) {
            return BackendAvailability.available("host memory (on the CPU backend every location is the same memory)");
        }
        if (!settings.pinningEnabled()) {
            return BackendAvailability.unavailable("pinning is disabled (compute.memory.pinning.enabled=false)");
        }
        return BackendAvailability.available("host memory locked with mlock; " + memlockLimitInWords()
                + (options.failWhenUnlockable() ? "; beyond it allocations fail (pinned-fallback=fail)"
                : "; beyond it PINNED memory stays unlocked, with a warning (pinned-fallback=unlocked)"));
    }

    /** Always true: every location is host memory. */
    @Override
    public boolean hostAccessible(MemoryLocation location) {
        return true;
    }

    @Override
    public NativeAllocation allocate(MemoryLocation location, long sizeBytes) {
        if (sizeBytes <= 0) {
            throw new IllegalArgumentException("allocation size must be positive: " + sizeBytes + " bytes");
        }
        if (closed) {
            throw new IllegalStateException("the CPU backend is closed");
        }
        if (location == MemoryLocation.PINNED) {
            if (!settings.pinningEnabled()) {
                throw new IllegalArgumentException("PINNED memory is not available: pinning is disabled (compute.memory.pinning.enabled=false)");
            }
            return track(allocatePinned(sizeBytes));
        }
        if (sizeBytes < MAPPED_THRESHOLD) {
            ledger.take(location, sizeBytes);
            long address = Posix.alignedMalloc(ALIGNMENT, sizeBytes);
            if (address == 0) {
                ledger.giveBack(sizeBytes);
                throw outOfMemory(location, sizeBytes, "posix_memalign returned no memory");
            }
            return track(allocation(location, address, sizeBytes, Origin.MALLOC));
        }
        long size = roundUpToPages(location, sizeBytes);
        return track(allocation(location, mapPages(location, size), size, Origin.MAPPED));
    }

    private NativeAllocation allocatePinned(long sizeBytes) {
        long size = roundUpToPages(MemoryLocation.PINNED, sizeBytes);
        long address = mapPages(MemoryLocation.PINNED, size);
        int error = locker.lock(address, size);
        if (error == 0) {
            lockedBytes.addAndGet(size);
            return allocation(MemoryLocation.PINNED, address, size, Origin.LOCKED);
        }
        String reason = "mlock of " + size + " bytes refused: " + Posix.describe(error) + "; " + memlockLimitInWords()
                + ", and this backend holds " + lockedBytes.get() + " bytes locked. "
                + (LinuxHost.mayLockWithoutLimit()
                        ? "The limit does not apply to this process, so the machine is short of memory it can lock; free some, or"
                        : "Raise the limit (ulimit -l, LimitMEMLOCK= in systemd, docker run --ulimit memlock=-1), or")
                + " set compute.memory.pinning.enabled=false";
        if (options.failWhenUnlockable()) {
            Posix.munmap(address, size);
            ledger.giveBack(size);
            throw new BackendOutOfMemoryException(reason + " (pinned-fallback=fail)");
        }
        unlockedPinnedAllocations.incrementAndGet();
        if (warnedUnlocked.compareAndSet(false, true)) {
            LOG.log(System.Logger.Level.WARNING, reason + ". PINNED memory from now on may stay unlocked (ordinary, swappable"
                    + " memory; on the CPU backend nothing else changes). This warning is logged once.");
        }
        return allocation(MemoryLocation.PINNED, address, size, Origin.MAPPED);
    }

    /** Every location is private anonymous or {@code malloc}ed memory, whose pages can go back, but PINNED's, which are locked. */
    @Override
    public long discardPages(NativeAllocation allocation, long offset, long bytes) {
        return allocation.location() == MemoryLocation.PINNED ? 0 : HostPages.discard(allocation.address() + offset, bytes);
    }

    @Override
    public void free(NativeAllocation allocation) {
        if (!(allocation.handle() instanceof Origin origin) || origin == Origin.RESERVED) {
            throw new IllegalArgumentException("not an allocation of this CPU backend"
                    + (allocation.handle() == Origin.RESERVED ? " (a reserved range: give it back with virtualMemory(...).release)" : "")
                    + ": " + allocation);
        }
        if (!live.remove(allocation.address(), allocation)) {
            throw new IllegalArgumentException("freed twice, or not allocated by this CPU backend: " + allocation);
        }
        if (origin == Origin.MALLOC) {
            Posix.free(allocation.address());
            ledger.giveBack(allocation.sizeBytes());
            return;
        }
        int error = Posix.munmap(allocation.address(), allocation.sizeBytes());
        if (error != 0) {
            throw new IllegalStateException("munmap of " + allocation + " failed: " + Posix.describe(error));
        }
        ledger.giveBack(allocation.sizeBytes());
        if (origin == Origin.LOCKED) {
            lockedBytes.addAndGet(-allocation.sizeBytes());
        }
    }

    /** Reserve/map/unmap/release in 2 MiB pages (option {@code page-size}); not for PINNED, whose pool keeps whole segments. */
    @Override
    public Optional<VirtualMemory> virtualMemory(MemoryLocation location) {
        return Optional.ofNullable(virtualMemory.get(location));
    }

    @Override
    public void copyToDevice(MemorySegment source, NativeAllocation target, long targetOffset, long bytes) {
        MemorySegment.copy(source, 0, host(target), targetOffset, bytes);
    }

    @Override
    public void copyToHost(NativeAllocation source, long sourceOffset, MemorySegment target, long bytes) {
        MemorySegment.copy(host(source), sourceOffset, target, 0, bytes);
    }

    /** Overlapping ranges are copied as {@code memmove} would. */
    @Override
    public void copyWithinDevice(NativeAllocation source, long sourceOffset, NativeAllocation target, long targetOffset, long bytes) {
        MemorySegment.copy(host(source), sourceOffset, host(target), targetOffset, bytes);
    }

    /** Copies now, on the caller's thread: there is no copy engine to hand the work to. */
    @Override
    public CompletableFuture<Void> copyToDeviceAsync(MemorySegment source, NativeAllocation target, long targetOffset, long bytes) {
        copyToDevice(source, target, targetOffset, bytes);
        return CompletableFuture.completedFuture(null);
    }

    /** Copies now, on the caller's thread. */
    @Override
    public CompletableFuture<Void> copyToHostAsync(NativeAllocation source, long sourceOffset, MemorySegment target, long bytes) {
        copyToHost(source, sourceOffset, target, bytes);
        return CompletableFuture.completedFuture(null);
    }

    @Override
    public KernelOps ops() {
        return ops;
    }

    @Override
    public Set<KernelSource.Language> kernelLanguages() {
        return Set.of(KernelSource.Language.JAVA);
    }

    /**
     * One's own kernels are Java kernels here ({@link KernelSource#java}): run on the launching thread over the device
     * access's segment, which is the memory itself at every location (read-only for a READ argument).
     */
    @Override
    public NativeKernel compileKernel(KernelSource source) {
        if (source.language() != KernelSource.Language.JAVA) {
            throw new UnsupportedOperationException("the cpu backend runs Java kernels (KernelSource.java), not " + source);
        }
        return JavaKernels.compile(source, CpuBackend::hostBytes);
    }

    private static MemorySegment hostBytes(KernelArgument.Buffer buffer) {
        return Objects.requireNonNull(buffer.hostSegment(), "every location of the cpu backend is host memory");
    }

    /**
     * Refuses new allocations. Memory still allocated stays valid and can still be freed: it belongs to the
     * process, not to this object, and the pool frees its segments before it closes the backend.
     */
    @Override
    public void close() {
        closed = true;
    }

    // ---- figures for tests and the detail line ----------------------------------------------------------------

    long lockedBytes() {
        return lockedBytes.get();
    }

    long unlockedPinnedAllocations() {
        return unlockedPinnedAllocations.get();
    }

    int liveAllocations() {
        return live.size();
    }

    long pageSize() {
        return pageSize;
    }

    static String memlockLimitInWords() {
        long limit = Posix.memlockLimit();
        String words = limit == Posix.RLIM_INFINITY ? "the memlock limit is unlimited"
                : "the memlock limit is " + limit + " bytes (ulimit -l: " + (limit >> 10) + " KiB)";
        return LinuxHost.mayLockWithoutLimit() ? words + ", lifted for this process by the IPC_LOCK capability" : words;
    }

    // ---- internals ----------------------------------------------------------------------------------------------

    private NativeAllocation track(NativeAllocation allocation) {
        live.put(allocation.address(), allocation);
        return allocation;
    }

    private static NativeAllocation allocation(MemoryLocation location, long address, long size, Origin origin) {
        return new NativeAllocation(location, address, size, MemorySegment.ofAddress(address).reinterpret(size), origin);
    }

    private long mapPages(MemoryLocation location, long size) {
        ledger.take(location, size);
        long result = Posix.mapAnonymous(size, Posix.PROT_READ | Posix.PROT_WRITE);
        if (result < 0) {
            ledger.giveBack(size);
            throw outOfMemory(location, size, "mmap failed: " + Posix.describe((int) -result));
        }
        return result;
    }

    private long roundUpToPages(MemoryLocation location, long sizeBytes) {
        if (sizeBytes > Long.MAX_VALUE - pageSize) {
            throw outOfMemory(location, sizeBytes, "larger than any address space");
        }
        return (sizeBytes + pageSize - 1) / pageSize * pageSize;
    }

    /** What both ways of getting host memory (plain allocations and {@link CpuVirtualMemory#map}) throw when there is none. */
    static BackendOutOfMemoryException outOfMemory(MemoryLocation location, long sizeBytes, String why) {
        DeviceMemoryInfo memory = LinuxHost.memory();
        return new BackendOutOfMemoryException("no host memory for " + sizeBytes + " bytes of " + location + ": " + why
                + " (" + memory.freeBytes() + " of " + memory.totalBytes() + " bytes available)");
    }

    private static MemorySegment host(NativeAllocation allocation) {
        MemorySegment segment = allocation.hostSegment();
        if (segment == null) {
            throw new IllegalArgumentException("not an allocation of the CPU backend (it has no host segment): " + allocation);
        }
        return segment;
    }
}
