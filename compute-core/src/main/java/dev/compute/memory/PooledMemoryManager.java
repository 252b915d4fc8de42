package dev.compute.memory;

import dev.compute.memory.internal.SafeEventListener;
import dev.compute.memory.jfr.JfrMemoryEvents;
import dev.compute.memory.recording.AllocationRecorder;
import dev.compute.memory.recording.AllocationTrace;
import dev.compute.memory.recording.RecordingOptions;
import dev.compute.memory.recording.RecordingResource;
import dev.compute.memory.resource.BackendResource;
import dev.compute.memory.resource.DeviceWork;
import dev.compute.memory.resource.Block;
import dev.compute.memory.resource.FailureCallbackResource;
import dev.compute.memory.resource.InspectableResource;
import dev.compute.memory.resource.MemoryResource;
import dev.compute.memory.resource.PoolSettings;
import dev.compute.memory.resource.ResourceAdaptor;
import dev.compute.memory.resource.StatisticsResource;
import dev.compute.memory.resource.pool.CachingPoolResource;
import dev.compute.memory.spi.BackendSelection;
import dev.compute.memory.spi.BackendSettings;
import dev.compute.memory.spi.ComputeBackend;
import java.io.IOException;
import java.lang.ref.WeakReference;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import org.jspecify.annotations.Nullable;

/**
 * The {@link UnifiedMemoryManager}: one resource chain per location (statistics → the out-of-memory handlers →
 * the application's adaptors → caching pool, or none → the backend's resource), leak detection, a maintenance
 * thread for scheduled trims and timeline samples, the registry of open views and accesses, the queues of requests
 * waiting for memory ({@link AllocationWaiters}), the files it has mapped ({@link MappedFiles}, beside the chains),
 * and the count of calls under way that makes closing safe while other threads still use buffers.
 */
final class PooledMemoryManager implements UnifiedMemoryManager {

    private static final System.Logger LOG = System.getLogger(UnifiedMemoryManager.class.getName());

    /** One location's resource chain and the figures kept beside it. */
    private static final class LocationChain {
        /** Where allocations and frees go: the recording adaptor at the top of the chain, or the statistics when recording is off. */
        final MemoryResource entry;
        /** The statistics adaptor, whose counts the figures read. */
        final StatisticsResource top;
        /** What holds memory and reports it: the pool, or the backend's resource when pooling is off. */
        final InspectableResource holding;
        final @Nullable CachingPoolResource pool;
        final BackendResource backend;
        final MemoryTimeline timeline;
        final boolean hostAccessible;
        final LongAdder hostToDevice = new LongAdder();
        final LongAdder deviceToHost = new LongAdder();
        final LongAdder deviceToDevice = new LongAdder();
        final LongAdder trims = new LongAdder();
        /**
         * The buffer of each block compaction may move ({@link CachingPoolResource#movable}), held weakly so that a
         * dropped buffer is still found as a leak; entered as the buffer is made, removed before its block goes back.
         */
        final Map<Block, WeakReference<UnifiedBuffer>> movable = new ConcurrentHashMap<>();
        /**
         * Buffers entered into and removed from {@link #movable}, and large host mirrors given back: what a compaction
         * could move, or where it could move it, changed.
         */
        final AtomicLong movableChanges = new AtomicLong();
        /** {@link #movableChanges} when a compaction on out-of-memory last made no room; -1 before any did. */
        volatile long fruitlessCompactionAt = -1;
        /**
         * Whether compaction may move this chain's blocks: not when the application's adaptors are in it, since one
         * may keep a block's place (as RMM's tracking adaptors key blocks by address) and would see it change.
         */
        final boolean compactable;

        LocationChain(MemoryResource entry, StatisticsResource top, InspectableResource holding, @Nullable CachingPoolResource pool,
                      BackendResource backend, MemoryTimeline timeline, boolean hostAccessible, boolean compactable) {
            this.compactable = compactable;
            this.entry = entry;
            this.top = top;
            this.holding = holding;
            this.pool = pool;
            this.backend = backend;
            this.timeline = timeline;
            this.hostAccessible = hostAccessible;
        }

        /**
         * Whether each block is checked before a buffer uses it: where the application's adaptors are in the chain
         * (the chain is not compactable), since a block smaller than asked would let a buffer write over its neighbours.
         */
        boolean checksBlocks() {
            return !compactable;
        }
    }

    private final ComputeBackend backend;
    private final EnumMap<MemoryLocation, LocationChain> chains = new EnumMap<>(MemoryLocation.class);
    private final List<MemoryLocation> locations;
    private final MemoryLocation defaultLocation;
    private final MemoryLocation mirrorLocation;
    private final long releaseThreshold;
    private final MemoryEventListener events;
    /** Null when recording is off ({@code compute.memory.recording.enabled=false}): the chains have no recording adaptor. */
    private final @Nullable AllocationRecorder recorder;
    private final LeakDetector leakDetector;
    private final ManagerSettings settings;
    private final AllocationWaiters waiters;
    private final ComputeOps ops = new BackendComputeOps(this);
    private final ScopeRegistry scopes = new ScopeRegistry();
    private final MappedFiles mappedFiles;
    private final Duration closeTimeout;
    private final Duration deviceWaitTimeout;
    private final @Nullable ScheduledExecutorService maintenance;
    private final Object closing = new Object();
    private final CountDownLatch closeDone = new CountDownLatch(1);
    /** Device work released blocks still wait for; close() frees nothing before it is done (or keeps everything). */
    private final Set<CompletableFuture<?>> releasedInFlight = ConcurrentHashMap.newKeySet();
    /** The budget of each block allocated through one; looked up on release only once a budget was made. */
    private final Map<Block, MemoryBudget> budgetOfBlock = new ConcurrentHashMap<>();
    private final Set<MemoryBudget> budgets = ConcurrentHashMap.newKeySet();
    private volatile boolean budgetsMade;
    private volatile boolean closed;
    private volatile boolean poolsFreed;
    /**
     * Threads inside allocate, release, a copy or the queueing of an op. close() sets {@code closed}, then waits
     * for this to drain, so no pool or backend call races the freeing of everything.
     */
    private final ActiveCalls activeCalls = new ActiveCalls();

    PooledMemoryManager(UnifiedMemoryManagerBuilder settings) {
        List<MemoryEventListener> listeners = new ArrayList<>(settings.eventListeners);
        listeners.add(JfrMemoryEvents.listener());
        this.events = SafeEventListener.of(listeners);
        this.recorder = settings.allocationRecording ? new AllocationRecorder() : null;
        this.waiters = new AllocationWaiters((type, location, bytes) -> allocate(type, location, bytes, false), events);
        this.leakDetector = new LeakDetector(this, settings.leakDetection, events);
        this.mappedFiles = new MappedFiles(settings.maxOpenMappedFiles);
        this.backend = openBackend(settings);
        try {
            long maxPoolSize = settings.maxPoolSizeOn(backend.memoryInfo(), backend.info().backend());
            this.releaseThreshold = settings.releaseThresholdUnder(maxPoolSize);
            this.closeTimeout = settings.closeTimeout;
            this.deviceWaitTimeout = settings.deviceWaitTimeout;
            List<MemoryLocation> usable = new ArrayList<>();
            for (MemoryLocation location : MemoryLocation.values()) {
                if (location == MemoryLocation.PINNED && !settings.pinningEnabled) {
                    continue;
                }
                if (backend.supports(location).available()) {
                    usable.add(location);
                    chains.put(location, buildChain(location, settings, maxPoolSize));
                }
            }
            this.locations = List.copyOf(usable);
            this.defaultLocation = chooseDefault(settings.defaultLocation);
            this.mirrorLocation = chains.containsKey(MemoryLocation.PINNED) && backend.hostAccessible(MemoryLocation.PINNED)
                    ? MemoryLocation.PINNED : MemoryLocation.HOST;
            warmUp(settings.warmup);
            this.settings = settings.resolved(backend.info().backend(), defaultLocation, maxPoolSize);
            this.maintenance = startMaintenance(settings);
        } catch (RuntimeException e) {
            chains.values().forEach(PooledMemoryManager::closeChain);
            backend.close();
            throw e;
        }
        LOG.log(System.Logger.Level.INFO, "compute memory on " + backend.info() + ", locations " + locations
                + ", default " + defaultLocation + ", pooling " + (settings.poolingEnabled ? "on" : "off") + ", max-pool-size "
                + this.settings.maxPoolSize() + " bytes" + (this.settings.maxPoolSizeShare() == null ? ""
                : " (" + settings.maxPoolSize + " of the device's " + backend.memoryInfo().totalBytes() + " bytes)")
                + ", leak detection " + settings.leakDetection);
    }

    private static ComputeBackend openBackend(UnifiedMemoryManagerBuilder settings) {
        if (settings.backendInstance != null) {
            return settings.backendInstance;
        }
        BackendSettings backendSettings = new BackendSettings(settings.device, settings.pinningEnabled,
                settings.stagingBufferSize(), settings.backendOptions);
        ClassLoader loader = Thread.currentThread().getContextClassLoader();
        BackendSelection selection = BackendSelection.choose(settings.backend, backendSettings,
                BackendSelection.providers(loader != null ? loader : PooledMemoryManager.class.getClassLoader()));
        LOG.log(System.Logger.Level.INFO, "compute backend '" + selection.provider().name() + "' chosen: " + selection.detail()
                + (selection.passedOver().isEmpty() ? "" : "; passed over: " + selection.passedOver()));
        return selection.provider().create(backendSettings);
    }

    /**
     * The backend's resource with the location's cap, the pool over it (unless pooling is off), the application's
     * adaptors over that in the order given, the compaction on out-of-memory over them (with pooling on, no adaptors
     * of the application's, and {@code compact-on-out-of-memory}), the out-of-memory handlers over that, the statistics
     * over those, and on top, unless recording is off, the recording adaptor. The compaction has an adaptor of its own,
     * so that its one try does not take one of the handlers' retries.
     */
    private LocationChain buildChain(MemoryLocation location, UnifiedMemoryManagerBuilder settings, long maxPoolSize) {
        long cap = location == MemoryLocation.PINNED ? settings.maxPinnedSize : maxPoolSize;
        BackendResource upstream = new BackendResource(backend, location, cap, ManagerSettings.capPropertyOf(location),
                settings.deviceWaitTimeout, events);
        CachingPoolResource pool = null;
        MemoryResource chain = upstream;
        if (settings.poolingEnabled) {
            PoolSettings layout = settings.expandableSegments ? PoolSettings.expandable() : PoolSettings.plainSegments();
            pool = new CachingPoolResource(upstream, layout.withDeviceWaitTimeout(settings.deviceWaitTimeout), events);
            chain = pool;
        }
        for (ResourceAdaptor adaptor : settings.resourceAdaptors) {
            MemoryResource wrapped = adaptor.wrap(chain, location);
            if (wrapped == null) {
                throw new IllegalStateException("the resource adaptor " + adaptor + " returned no resource for " + location
                        + ": it must return one that wraps the upstream it was given");
            }
            chain = wrapped;
        }
        if (pool != null && settings.resourceAdaptors.isEmpty() && settings.compactOnOutOfMemory) {
            chain = new FailureCallbackResource(chain, location, List.of(this::compactForRoom), 1, events);
        }
        if (!settings.outOfMemoryHandlers.isEmpty()) {
            chain = new FailureCallbackResource(chain, location, settings.outOfMemoryHandlers, settings.outOfMemoryRetries, events);
        }
        StatisticsResource statistics = new StatisticsResource(chain);
        MemoryResource entry = recorder != null ? new RecordingResource(statistics, location, recorder) : statistics;
        return new LocationChain(entry, statistics, pool != null ? pool : upstream, pool, upstream,
                new MemoryTimeline(settings.timelineCapacity), backend.hostAccessible(location), settings.resourceAdaptors.isEmpty());
    }

    /** Each location's warm-up ({@link PoolWarmup}); a location this manager lacks is a bad setting. */
    private void warmUp(Map<MemoryLocation, List<WarmupBlocks>> warmup) {
        warmup.forEach((location, blocks) -> {
            LocationChain chain = chains.get(location);
            if (chain == null || chain.pool == null) {
                throw new InvalidSettingException(UnifiedMemoryManagerBuilder.warmupProperty(location), blocks,
                        "a warm-up of a location this backend (" + backend.info().backend() + ") offers: one of " + chains.keySet());
            }
            PoolWarmup.warm(chain.pool, blocks, releaseThreshold);
        });
    }

    private MemoryLocation chooseDefault(@Nullable MemoryLocation configured) {
        MemoryLocation chosen = configured != null ? configured : backend.defaultLocation();
        if (!chains.containsKey(chosen)) {
            throw new InvalidSettingException("compute.memory.default-location", chosen,
                    "a location this backend (" + backend.info().backend() + ") offers: auto or one of " + locations);
        }
        return chosen;
    }

    private @Nullable ScheduledExecutorService startMaintenance(UnifiedMemoryManagerBuilder settings) {
        long trimMillis = settings.trimInterval.toMillis();
        long compactionMillis = settings.poolingEnabled ? settings.compactionInterval.toMillis() : 0;
        long sampleMillis = settings.timelineInterval.toMillis();
        if (trimMillis <= 0 && compactionMillis <= 0 && sampleMillis <= 0) {
            return null;
        }
        ScheduledExecutorService executor = Executors.newSingleThreadScheduledExecutor(
                Thread.ofPlatform().daemon().name("compute-memory-maintenance").factory());
        if (trimMillis > 0) {
            executor.scheduleWithFixedDelay(this::scheduledTrim, trimMillis, trimMillis, TimeUnit.MILLISECONDS);
        }
        if (compactionMillis > 0) {
            executor.scheduleWithFixedDelay(this::scheduledCompaction, compactionMillis, compactionMillis, TimeUnit.MILLISECONDS);
        }
        if (sampleMillis > 0) {
            sampleTimeline();
            executor.scheduleAtFixedRate(this::sampleTimeline, sampleMillis, sampleMillis, TimeUnit.MILLISECONDS);
        }
        return executor;
    }

    private void scheduledTrim() {
        try {
            long released = trim();
            if (released > 0) {
                LOG.log(System.Logger.Level.DEBUG, "scheduled trim released " + released + " bytes");
            }
        } catch (RuntimeException e) {
            LOG.log(System.Logger.Level.WARNING, "scheduled trim failed", e);
        }
    }

    private void scheduledCompaction() {
        try {
            for (MemoryLocation location : locations) {
                if (closed) {
                    return;
                }
                CompactionReport report = compact(location);
                if (report.buffersMoved() > 0 || report.bytesReleased() > 0) {
                    LOG.log(System.Logger.Level.DEBUG, "scheduled compaction of " + location + " moved " + report.buffersMoved()
                            + " buffer(s) and released " + report.bytesReleased() + " bytes");
                }
            }
        } catch (IllegalStateException closedMeanwhile) {
            // the manager closed between the check and the compaction: nothing left to compact
        } catch (RuntimeException e) {
            LOG.log(System.Logger.Level.WARNING, "scheduled compaction failed", e);
        }
    }

    /** Adds one sample per location to the timeline; also called by the maintenance thread. */
    void sampleTimeline() {
        if (closed) {
            return;
        }
        long now = System.currentTimeMillis();
        chains.forEach((location, chain) -> {
            MemoryStatistics s = statistics(location);
            chain.timeline.add(new MemoryTimeline.Sample(now, s.reservedBytes(), s.allocatedBytes(), s.cachedBytes()));
        });
    }

    // ---- allocation -------------------------------------------------------------------------------------------

    @Override
    public UnifiedBuffer allocate(long bytes, MemoryLocation location) {
        return allocate(DataType.INT8, location, bytes, true);
    }

    @Override
    public UnifiedBuffer allocate(DataType type, long count, MemoryLocation location) {
        return allocate(type, location, elementBytes(type, count), true);
    }

    private static long elementBytes(DataType type, long count) {
        if (count <= 0) {
            throw new IllegalArgumentException("element count must be positive: " + count);
        }
        return type.bytesFor(count);
    }

    /** An allocation counted by {@code budget}: the block is known to it until its memory goes back. */
    UnifiedBuffer allocateFor(MemoryBudget budget, DataType type, long count, MemoryLocation location) {
        UnifiedBuffer buffer = allocate(type, count, location);
        Block block = buffer.ownBlock();
        budgetOfBlock.put(block, budget);
        budget.opened(block, buffer);
        return buffer;
    }

    @Override
    public MemoryBudget budget(String name, long limitBytes) {
        if (name == null || name.isBlank()) {
            throw new IllegalArgumentException("a memory budget needs a name");
        }
        if (limitBytes <= 0) {
            throw new IllegalArgumentException("the limit of memory budget '" + name + "' must be positive: " + limitBytes + " bytes");
        }
        if (closed) {
            throw new IllegalStateException("this UnifiedMemoryManager is closed");
        }
        MemoryBudget budget = new MemoryBudget(this, name, limitBytes);
        budgetsMade = true;
        budgets.add(budget);
        if (closed) { // closed as it was made: the close may not have seen it
            budgets.remove(budget);
            budget.managerClosed(true);
            throw new IllegalStateException("this UnifiedMemoryManager is closed");
        }
        return budget;
    }

    @Override
    public List<MemoryBudget> budgets() {
        return List.copyOf(budgets);
    }

    void budgetClosed(MemoryBudget budget) {
        budgets.remove(budget);
    }

    /** {@code reportFailure}: whether listeners hear of an out-of-memory (not of a waiting request's retries). */
    private UnifiedBuffer allocate(DataType type, MemoryLocation location, long bytes, boolean reportFailure) {
        if (bytes <= 0) {
            throw new IllegalArgumentException("allocation size must be positive: " + bytes + " bytes");
        }
        scopes.endHandedOver();
        if (closed) {
            scopes.endAllOfCurrentThread(); // told the manager closed, this thread has lost its views too
        }
        int stripe = activeCalls.enter();
        try {
            LocationChain chain = chain(location);
            return newBuffer(chain, location, type, bytes, allocateBlock(chain, location, bytes, reportFailure));
        } finally {
            exit(stripe);
        }
    }

    @Override
    public UnifiedBuffer mapFile(Path file, DataType type, FileMapMode mode) throws IOException {
        return map(file, type, mode, 0, null);
    }

    @Override
    public UnifiedBuffer mapFile(Path file, DataType type, FileMapMode mode, long byteOffset, long byteLength) throws IOException {
        if (byteLength <= 0) {
            throw new IllegalArgumentException("a mapping's length must be positive: " + byteLength + " bytes");
        }
        return map(file, type, mode, byteOffset, byteLength);
    }

    /** Maps as {@link #allocate} allocates: counted in as a call, refused once closed, tracked for leaks (every one). */
    private UnifiedBuffer map(Path file, DataType type, FileMapMode mode, long byteOffset, @Nullable Long byteLength) throws IOException {
        Objects.requireNonNull(file, "file");
        Objects.requireNonNull(type, "type");
        Objects.requireNonNull(mode, "mode");
        scopes.endHandedOver();
        if (closed) {
            scopes.endAllOfCurrentThread(); // told the manager closed, this thread has lost its views too
        }
        int stripe = activeCalls.enter();
        try {
            if (!chain(MemoryLocation.HOST).hostAccessible) {
                throw new IllegalStateException("HOST memory of the " + backend.info().backend() + " backend is not host memory: no file can be mapped into it");
            }
            String site = leakDetector.mappingSite();
            MappedFile mapping = mappedFiles.map(file, type, mode, byteOffset, byteLength, site);
            return new UnifiedBuffer(this, type, mapping, leakDetector.trackMapping(MemoryLocation.HOST, mapping.size(), mapping, site));
        } finally {
            exit(stripe);
        }
    }

    private UnifiedBuffer newBuffer(LocationChain chain, MemoryLocation location, DataType type, long bytes, Block block) {
        UnifiedBuffer buffer = new UnifiedBuffer(this, location, type, bytes, block, leakDetector.track(location, bytes, block));
        if (chain.compactable && chain.pool != null && chain.pool.movable(block)) {
            chain.movable.put(block, new WeakReference<>(buffer));
            chain.movableChanges.incrementAndGet();
        }
        return buffer;
    }

    private Block allocateBlock(LocationChain chain, MemoryLocation location, long bytes, boolean reportFailure) {
        try {
            Block block = chain.entry.allocate(bytes);
            return chain.checksBlocks() ? checked(chain, location, block, bytes) : block;
        } catch (DeviceOutOfMemoryException e) {
            if (reportFailure) {
                events.allocationFailed(location, bytes, e.reason());
            }
            throw e;
        }
    }

    /**
     * A block from a chain with the application's adaptors, as a buffer may use it: at least {@code bytes} long and
     * within its segment. Otherwise it goes back and the allocation fails, rather than let the buffer reach memory
     * that is not its own.
     */
    private static Block checked(LocationChain chain, MemoryLocation location, Block block, long bytes) {
        long segmentBytes = block.segment().sizeBytes();
        if (block.size() >= bytes && block.offset() >= 0 && block.offset() <= segmentBytes - block.size()) {
            return block;
        }
        IllegalStateException wrong = new IllegalStateException("a resource adaptor of the " + location + " chain handed out a block of "
                + block.size() + " bytes at offset " + block.offset() + " of a " + segmentBytes + "-byte segment for a request of "
                + bytes + " bytes: a buffer on it would reach memory that is not its own");
        try {
            chain.entry.deallocate(block);
        } catch (Throwable e) {
            wrong.addSuppressed(e);
        }
        throw wrong;
    }

    @Override
    public CompletableFuture<UnifiedBuffer> allocateAsync(long bytes, MemoryLocation location, Duration timeout) {
        return allocateAsync(DataType.INT8, location, bytes, timeout);
    }

    @Override
    public CompletableFuture<UnifiedBuffer> allocateAsync(DataType type, long count, MemoryLocation location, Duration timeout) {
        return allocateAsync(type, location, elementBytes(type, count), timeout);
    }

    private CompletableFuture<UnifiedBuffer> allocateAsync(DataType type, MemoryLocation location, long bytes, Duration timeout) {
        if (bytes <= 0) {
            throw new IllegalArgumentException("allocation size must be positive: " + bytes + " bytes");
        }
        if (Objects.requireNonNull(timeout, "timeout").isNegative()) {
            throw new IllegalArgumentException("the wait for memory must not be negative: " + timeout);
        }
        return waiters.request(type, location, bytes, chain(location).backend.largestPossibleBytes(), timeout);
    }

    /**
     * All or none: together where the chain's pool places them so ({@link MemoryResource#allocateAdjacent}), else one
     * by one, giving back those taken when one fails.
     */
    @Override
    public List<UnifiedBuffer> allocateBatch(DataType type, long[] counts, MemoryLocation location) {
        Objects.requireNonNull(type, "type");
        if (counts.length == 0) {
            throw new IllegalArgumentException("a batch needs at least one buffer");
        }
        long[] bytes = new long[counts.length];
        long total = 0;
        for (int i = 0; i < counts.length; i++) {
            if (counts[i] <= 0) {
                throw new IllegalArgumentException("element count must be positive: counts[" + i + "] is " + counts[i]);
            }
            bytes[i] = type.bytesFor(counts[i]);
            total += bytes[i];
            if (total < 0) {
                throw new AllocationAboveLimitException(location, Long.MAX_VALUE, OutOfMemoryReason.POOL_LIMIT, "a batch whose first "
                        + (i + 1) + " of " + counts.length + " buffers of " + type + " already total more than " + Long.MAX_VALUE
                        + " bytes is above every limit: nothing was allocated");
            }
        }
        scopes.endHandedOver();
        if (closed) {
            scopes.endAllOfCurrentThread();
        }
        int stripe = activeCalls.enter();
        try {
            LocationChain chain = chain(location);
            List<Block> blocks = chain.entry.allocateAdjacent(bytes);
            if (blocks != null && chain.checksBlocks()) {
                blocks = checkedBatch(chain, location, blocks, bytes);
            }
            if (blocks == null) {
                blocks = allocateEach(chain, location, bytes);
            }
            List<UnifiedBuffer> buffers = new ArrayList<>(blocks.size());
            for (int i = 0; i < blocks.size(); i++) {
                buffers.add(newBuffer(chain, location, type, bytes[i], blocks.get(i)));
            }
            return List.copyOf(buffers);
        } finally {
            exit(stripe);
        }
    }

    /** A batch placed together by a chain with the application's adaptors, each block {@link #checked}; all go back if one is wrong. */
    private static List<Block> checkedBatch(LocationChain chain, MemoryLocation location, List<Block> blocks, long[] bytes) {
        if (blocks.size() != bytes.length) {
            blocks.forEach(chain.entry::deallocate);
            throw new IllegalStateException("a resource adaptor of the " + location + " chain placed " + blocks.size()
                    + " blocks for a batch of " + bytes.length);
        }
        for (int i = 0; i < blocks.size(); i++) {
            try {
                checked(chain, location, blocks.get(i), bytes[i]);
            } catch (IllegalStateException e) {
                for (int j = 0; j < blocks.size(); j++) {
                    if (j != i) {
                        chain.entry.deallocate(blocks.get(j));
                    }
                }
                throw e;
            }
        }
        return blocks;
    }

    private List<Block> allocateEach(LocationChain chain, MemoryLocation location, long[] bytes) {
        List<Block> blocks = new ArrayList<>(bytes.length);
        try {
            for (long size : bytes) {
                blocks.add(allocateBlock(chain, location, size, true));
            }
            return blocks;
        } catch (DeviceOutOfMemoryException e) {
            blocks.forEach(chain.entry::deallocate);
            int failed = blocks.size();
            String message = "buffer " + (failed + 1) + " of a batch of " + bytes.length + " (" + bytes[failed] + " bytes) could not be"
                    + " allocated, so the " + failed + " allocated before it were given back: " + e.getMessage();
            DeviceOutOfMemoryException batchFailure = e instanceof AllocationAboveLimitException
                    ? new AllocationAboveLimitException(location, bytes[failed], e.reason(), message)
                    : new DeviceOutOfMemoryException(location, bytes[failed], e.reason(), message);
            batchFailure.initCause(e);
            throw batchFailure;
        } catch (RuntimeException | Error e) {
            blocks.forEach(chain.entry::deallocate);
            throw e;
        }
    }

    private LocationChain chain(MemoryLocation location) {
        if (closed) {
            throw new IllegalStateException("this UnifiedMemoryManager is closed");
        }
        LocationChain chain = chains.get(location);
        if (chain == null) {
            throw new IllegalArgumentException(location + " memory is not available on this manager (" + backend.info().backend()
                    + "): " + (location == MemoryLocation.PINNED && backend.supports(location).available()
                    ? "pinning is disabled (compute.memory.pinning.enabled=false)"
                    : backend.supports(location).detail()) + "; available: " + locations);
        }
        return chain;
    }

    /**
     * Gives a closed buffer's blocks back: to its location's chain, or a mapped file to be unmapped. Views ending while
     * the manager closes still give theirs back (so the close report does not count them as open); once the pools are
     * freed there is nothing to give back to.
     */
    void release(MemoryLocation location, Block block, @Nullable Block mirror, CompletableFuture<?> inFlight) {
        int stripe = activeCalls.enter();
        try {
            if (poolsFreed) {
                return;
            }
            if (!inFlight.isDone()) {
                releasedInFlight.add(inFlight);
                inFlight.whenComplete((result, failure) -> releasedInFlight.remove(inFlight));
            }
            // an application's adaptor may throw from its free (anything): the mirror still goes back and the waiters
            // still hear of it, and the caller gets the adaptor's exception after that
            Throwable failure = null;
            if (block instanceof MappedFile mapping) {
                mappedFiles.release(mapping, inFlight);
            } else {
                if (budgetsMade) {
                    MemoryBudget budget = budgetOfBlock.remove(block);
                    if (budget != null) {
                        budget.released(block);
                    }
                }
                LocationChain chain = chains.get(location);
                if (chain.compactable && chain.pool != null && chain.pool.movable(block)) {
                    chain.movable.remove(block); // before the pool may hand the block to another buffer
                    chain.movableChanges.incrementAndGet();
                }
                failure = deallocate(chain, block, inFlight, null);
                waiters.released(location, inFlight);
            }
            if (mirror != null) {
                LocationChain mirrorChain = chains.get(mirrorLocation);
                if (mirrorChain.pool != null && mirrorChain.pool.movable(mirror)) {
                    // a large mirror never moves, but the place it gives back may let buffers there move
                    mirrorChain.movableChanges.incrementAndGet();
                }
                failure = deallocate(mirrorChain, mirror, inFlight, failure);
                waiters.released(mirrorLocation, inFlight);
            }
            if (failure instanceof RuntimeException unchecked) {
                throw unchecked;
            }
            if (failure instanceof Error error) {
                throw error;
            }
        } finally {
            activeCalls.exit(stripe);
        }
    }

    /** Frees a block through its chain; what the chain throws is returned, added to an earlier failure if there is one. */
    private static @Nullable Throwable deallocate(LocationChain chain, Block block, CompletableFuture<?> inFlight,
                                                 @Nullable Throwable earlier) {
        try {
            chain.entry.deallocate(block, inFlight);
            return earlier;
        } catch (Throwable e) {
            if (earlier == null) {
                return e;
            }
            earlier.addSuppressed(e);
            return earlier;
        }
    }

    /**
     * Bound while a host mirror is allocated. That happens under its buffer's monitor, and out-of-memory handlers and
     * listeners run within it: a compaction they start must not wait for other buffers' monitors, or two such threads
     * wait on each other's for ever.
     */
    private static final ScopedValue<Boolean> ALLOCATING_MIRROR = ScopedValue.newInstance();

    Block allocateMirror(long bytes) {
        int stripe = activeCalls.enter();
        try {
            return ScopedValue.where(ALLOCATING_MIRROR, true).call(() -> allocateBlock(chain(mirrorLocation), mirrorLocation, bytes, true));
        } finally {
            activeCalls.exit(stripe);
        }
    }

    // ---- what buffers and ops use -----------------------------------------------------------------------------

    ComputeBackend computeBackend() {
        return backend;
    }

    boolean hostAccessible(MemoryLocation location) {
        LocationChain chain = chains.get(location);
        return chain != null && chain.hostAccessible;
    }

    void countHostToDevice(MemoryLocation location, long bytes) {
        chains.get(location).hostToDevice.add(bytes);
    }

    void countDeviceToHost(MemoryLocation location, long bytes) {
        chains.get(location).deviceToHost.add(bytes);
    }

    void countDeviceToDevice(MemoryLocation location, long bytes) {
        chains.get(location).deviceToDevice.add(bytes);
    }

    /**
     * Counts a buffer's call in (close() waits for it before freeing anything) after ending the scopes other
     * threads handed to this one; throws once the manager is closed. Returns what to give {@link #exit}.
     */
    int enter(UnifiedBuffer buffer) {
        scopes.endHandedOver();
        int stripe = activeCalls.enter();
        if (closed) {
            activeCalls.exit(stripe);
            scopes.endAllOfCurrentThread(); // told the manager closed, this thread has lost its views too
            throw new IllegalStateException(buffer.closedByManager());
        }
        return stripe;
    }

    /**
     * Counts in the end of an access, which must finish (its handle records device work) before close() frees
     * anything; unlike {@link #enter} it works on a closed manager, whose close may be waiting for it.
     */
    int enterToEnd() {
        return activeCalls.enter();
    }

    /** Counts a call out; a call the close overtook leaves this thread without views, as a refused one does. */
    void exit(int stripe) {
        activeCalls.exit(stripe);
        if (closed) {
            scopes.endAllOfCurrentThread();
        }
    }

    ScopeRegistry scopes() {
        return scopes;
    }

    /** The longest a buffer's call waits for device work it depends on. */
    Duration deviceWaitTimeout() {
        return deviceWaitTimeout;
    }

    void awaitDeviceIdle() {
        if (!backend.awaitIdle(closeTimeout)) {
            LOG.log(System.Logger.Level.WARNING, "device work was still running after " + closeTimeout.toMillis()
                    + " ms while a device access that could not record its work ended");
        }
    }

    // ---- figures ------------------------------------------------------------------------------------------------

    @Override
    public MemoryLocation defaultLocation() {
        return defaultLocation;
    }

    @Override
    public List<MemoryLocation> locations() {
        return locations;
    }

    @Override
    public BackendInfo backendInfo() {
        return backend.info();
    }

    @Override
    public DeviceMemoryInfo deviceMemory() {
        return backend.memoryInfo();
    }

    @Override
    public ManagerSettings settings() {
        return settings;
    }

    /** Each figure from the resource that owns it: counts from the statistics adaptor, holdings from the pool or backend. */
    @Override
    public MemoryStatistics statistics(MemoryLocation location) {
        LocationChain chain = known(location);
        StatisticsResource.Counts counts = chain.top.counts();
        InspectableResource holding = chain.holding;
        long reserved = holding.reservedBytes();
        long cached = Math.max(0, reserved - counts.allocatedBytes());
        // read after the counts: a block freed in between (cached by the pool, its free not yet counted) can show here
        // and not in cached; no free block is larger than what is cached, and fragmentation stays within 0 and 1
        long largestFree = Math.min(holding.largestFreeBlockBytes(), cached);
        CachingPoolResource pool = chain.pool;
        AllocationWaiters.Figures waiting = waiters.figures(location);
        return new MemoryStatistics(location,
                counts.allocatedBytes(), counts.allocatedBytesPeak(), counts.requestedBytes(), counts.requestedBytesPeak(),
                reserved, holding.reservedBytesPeak(), cached, largestFree,
                counts.liveBlocks(), holding.segmentCount(), counts.allocations(), counts.frees(),
                pool != null ? pool.poolHits() : 0, pool != null ? pool.poolMisses() : chain.backend.backendAllocations(),
                chain.backend.backendAllocations(), chain.backend.backendFrees(), pool != null ? pool.oomRetries() : 0,
                chain.trims.sum(), chain.hostToDevice.sum(), chain.deviceToHost.sum(), chain.deviceToDevice.sum(),
                waiting.waiting(), waiting.waits(), waiting.timeouts());
    }

    @Override
    public Map<MemoryLocation, MemoryStatistics> statistics() {
        Map<MemoryLocation, MemoryStatistics> all = new LinkedHashMap<>();
        for (MemoryLocation location : locations) {
            all.put(location, statistics(location));
        }
        return all;
    }

    @Override
    public MappedFileStatistics mappedFileStatistics() {
        return mappedFiles.statistics();
    }

    @Override
    public MemorySnapshot snapshot(MemoryLocation location) {
        return new MemorySnapshot(location, leakDetector.withSites(location, known(location).holding.segments()));
    }

    /** The chain of a location this manager has, open or closed. */
    private LocationChain known(MemoryLocation location) {
        LocationChain chain = chains.get(location);
        if (chain == null) {
            throw new IllegalArgumentException(location + " memory is not available on this manager; available: " + locations);
        }
        return chain;
    }

    @Override
    public List<MemoryTimeline.Sample> timeline(MemoryLocation location) {
        return known(location).timeline.samples();
    }

    @Override
    public long trim() {
        return trimAll(releaseThreshold);
    }

    @Override
    public long releaseCachedMemory() {
        return trimAll(0);
    }

    private long trimAll(long keepBytes) {
        int stripe = activeCalls.enter();
        try {
            long released = 0;
            for (LocationChain chain : chains.values()) {
                if (closed) {
                    break;
                }
                released += trimLocation(chain, keepBytes);
            }
            return released;
        } finally {
            activeCalls.exit(stripe);
        }
    }

    @Override
    public List<CompactionReport> compact() {
        long waitUntil = System.nanoTime() + deviceWaitTimeout.toNanos(); // device work at every location, together
        List<CompactionReport> reports = new ArrayList<>(locations.size());
        for (MemoryLocation location : locations) {
            reports.add(compact(location, waitUntil));
        }
        return reports;
    }

    /**
     * The handler behind {@code compact-on-out-of-memory}: compacts the location where memory ran out and asks for one
     * more try where that moved a buffer or gave memory back. Waits for device work no longer than a compaction does. A
     * compaction that made no room is not repeated until a large buffer is allocated or closed there, so that a caller
     * that meets out-of-memory again and again (a {@code tryAllocate} as back-pressure) does not walk the pool each time.
     */
    private boolean compactForRoom(MemoryLocation location, long requestedBytes, int attempt, DeviceOutOfMemoryException failure) {
        if (ALLOCATING_MIRROR.isBound()) {
            // a mirror may move nothing (see ALLOCATING_MIRROR): no compaction was tried, so none is marked fruitless
            return false;
        }
        LocationChain chain = chain(location);
        long changes = chain.movableChanges.get();
        if (changes == chain.fruitlessCompactionAt) {
            return false;
        }
        CompactionReport report;
        try {
            report = compact(location);
        } catch (RuntimeException e) {
            if (closed) {
                throw e;
            }
            // the pool's own try at room, not the caller's: a move that failed (a copy the device refused) left its
            // buffer where it was, and the allocation fails as out of memory, which tryAllocate and waiters expect
            LOG.log(System.Logger.Level.WARNING, "the compaction of " + location + " on out-of-memory failed", e);
            failure.addSuppressed(e);
            return false;
        }
        boolean room = report.buffersMoved() > 0 || report.bytesReleased() > 0;
        if (!room) {
            chain.fruitlessCompactionAt = changes;
        }
        return room;
    }

    @Override
    public CompactionReport compact(MemoryLocation location) {
        return compact(location, System.nanoTime() + deviceWaitTimeout.toNanos());
    }

    /**
     * Tries the pool's live blocks in its compaction order; each whose buffer is known (a movable block) moves under
     * that buffer's monitor, into a place the pool holds, with a copy within the device. Then trims. Device work in
     * flight on the buffers, all of them together, is waited for until {@code waitUntil} ({@link System#nanoTime()}).
     */
    private CompactionReport compact(MemoryLocation location, long waitUntil) {
        int stripe = activeCalls.enter();
        try {
            LocationChain chain = chain(location);
            long start = System.nanoTime();
            MemoryStatistics before = statistics(location);
            CachingPoolResource pool = chain.pool;
            if (pool == null) {
                return CompactionReport.nothingToDo(before, Duration.ofNanos(System.nanoTime() - start));
            }
            long moved = 0;
            long bytesMoved = 0;
            long inUse = 0;
            List<Block> order = ALLOCATING_MIRROR.isBound() ? List.of() : pool.compactionOrder(); // moves none, trims
            for (Block block : order) {
                WeakReference<UnifiedBuffer> user = chain.movable.get(block);
                UnifiedBuffer buffer = user == null ? null : user.get();
                if (buffer == null || closed) {
                    continue;
                }
                switch (buffer.relocate((own, keepData) -> pool.relocate(own, (from, to) -> {
                    if (keepData) {
                        backend.copyWithinDevice(from.segment(), from.offset(), to.segment(), to.offset(), from.size());
                    }
                }), waitUntil)) {
                    case MOVED -> {
                        moved++;
                        bytesMoved += block.size();
                    }
                    case IN_USE -> inUse++;
                    case NO_PLACE -> { }
                }
            }
            long released = closed ? 0 : trimLocation(chain, releaseThreshold);
            if (moved > 0) {
                // free space coalesced, and what emptied was given back under the cap: a waiting request may fit now
                waiters.released(location, CompletableFuture.completedFuture(null));
            }
            MemoryStatistics after = statistics(location);
            CompactionReport report = new CompactionReport(location, moved, bytesMoved, inUse, released,
                    before.reservedBytes(), after.reservedBytes(), before.largestFreeBlockBytes(), after.largestFreeBlockBytes(),
                    before.fragmentation(), after.fragmentation(), Duration.ofNanos(System.nanoTime() - start));
            events.compacted(report);
            return report;
        } finally {
            activeCalls.exit(stripe);
        }
    }

    private long trimLocation(LocationChain chain, long keepBytes) {
        long released = chain.holding.trim(keepBytes);
        chain.trims.increment();
        if (released > 0) {
            events.trimmed(chain.backend.location(), released);
        }
        return released;
    }

    @Override
    public void startRecording(RecordingOptions options) {
        AllocationRecorder on = recorder();
        if (closed) {
            throw new IllegalStateException("this UnifiedMemoryManager is closed");
        }
        on.start(options, settings.toString());
    }

    @Override
    public AllocationTrace stopRecording() {
        return recorder().stop();
    }

    private AllocationRecorder recorder() {
        if (recorder == null) {
            throw new IllegalStateException("allocation recording is off for this manager (compute.memory.recording.enabled=false)");
        }
        return recorder;
    }

    @Override
    public boolean isRecording() {
        return recorder != null && recorder.isRecording();
    }

    @Override
    public ComputeOps ops() {
        return ops;
    }

    @Override
    public List<LiveBufferReport> liveBuffers() {
        List<LiveBufferReport> live = new ArrayList<>();
        chains.forEach((location, chain) -> {
            for (MemorySnapshot.Segment segment : snapshot(location).segments()) {
                for (MemorySnapshot.Block block : segment.blocks()) {
                    if (block.state() == MemorySnapshot.BlockState.LIVE) {
                        live.add(new LiveBufferReport(location, block.requestedBytes(), block.allocationSite()));
                    }
                }
            }
        });
        for (MappedFile mapping : mappedFiles.open()) {
            live.add(new LiveBufferReport(MemoryLocation.HOST, mapping.size(), mapping.allocationSite(), mapping.range().file()));
        }
        return live;
    }

    @Override
    public long leaksDetected() {
        return leakDetector.leaksReported();
    }

    @Override
    public boolean isClosed() {
        return closed;
    }

    /**
     * Closes in an order that never frees memory a thread can still reach: mark closed (new calls fail), wait for
     * calls under way (one of them may be opening a view), end every view and access (this thread's and shared ones
     * now, other threads' when they next call in or end), wait for device work, and only then free the pools and
     * close the backend. The waits are bounded by the close timeout together; what is still held then is kept, not
     * freed, and said in the log. A second close, on another thread, returns once the first is done, having ended
     * its own views meanwhile.
     */
    @Override
    public void close() {
        synchronized (closing) {
            if (closed) {
                awaitOtherClose();
                return;
            }
            closed = true;
        }
        waiters.close();
        long deadline = System.nanoTime() + closeTimeout.toNanos();
        try {
            boolean callsEnded = awaitCalls(deadline);
            boolean scopesEnded = scopes.closeAll(deadline);
            boolean deviceIdle = backend.awaitIdle(Duration.ofNanos(Math.max(0, deadline - System.nanoTime())))
                    && awaitReleasedWork(deadline);
            if (maintenance != null) {
                maintenance.shutdownNow();
            }
            boolean memoryBack = callsEnded && scopesEnded && deviceIdle;
            if (memoryBack) {
                freeEverything(deadline);
            }
            closeBudgets(memoryBack);
            if (!memoryBack) {
                LOG.log(System.Logger.Level.WARNING, "UnifiedMemoryManager closed, but after " + closeTimeout.toMillis()
                        + " ms " + (scopesEnded ? "" : "views or accesses were still open (held by " + scopes.holders() + "), ")
                        + (callsEnded ? "" : "calls were still under way, ") + (deviceIdle ? "" : "device work was still running, ")
                        + "so its pools keep their memory (reserved " + reservedBytes() + " bytes) and "
                        + mappedFiles.statistics().openMappings() + " mapped file(s) stay mapped, rather than be freed under their users; "
                        + "it goes back to the system with the process. Raise compute.memory.close-timeout, or end views and "
                        + "accesses before closing.");
            }
        } finally {
            try {
                backend.close();
            } catch (RuntimeException e) {
                LOG.log(System.Logger.Level.ERROR, "closing the compute backend failed", e);
            } finally {
                closeDone.countDown();
            }
        }
    }

    /** Every budget closes with the manager; its figures count nothing more where the memory went back with the pools. */
    private void closeBudgets(boolean memoryBack) {
        for (MemoryBudget budget : budgets) {
            budget.managerClosed(memoryBack);
        }
        budgets.clear();
        if (memoryBack) {
            budgetOfBlock.clear();
        }
    }

    /** Another thread is closing: end the views it hands to this one, until it is done. */
    private void awaitOtherClose() {
        try {
            while (!closeDone.await(1, TimeUnit.MILLISECONDS)) {
                scopes.endHandedOver();
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        scopes.endHandedOver();
    }

    /** Device work the pools wait for before reusing released blocks (kernels, copies, users' own streams). */
    private boolean awaitReleasedWork(long deadline) {
        return DeviceWork.awaitAll(releasedInFlight, deadline);
    }

    private boolean awaitCalls(long deadline) {
        while (activeCalls.any()) {
            if (System.nanoTime() - deadline >= 0) {
                return false;
            }
            Thread.onSpinWait();
            Thread.yield();
        }
        return true;
    }

    private long reservedBytes() {
        long reserved = 0;
        for (MemoryLocation location : locations) {
            try {
                reserved += statistics(location).reservedBytes();
            } catch (RuntimeException e) {
                // a figure for the log only
            }
        }
        return reserved;
    }

    private void freeEverything(long deadline) {
        List<LiveBufferReport> live = liveBuffers();
        poolsFreed = true;
        awaitCalls(deadline); // a release that saw the pools open finishes first
        if (!live.isEmpty()) {
            StringBuilder report = new StringBuilder("UnifiedMemoryManager closed with " + live.size()
                    + " buffer(s) still open; their memory is freed now and the buffers can no longer be used:");
            for (LiveBufferReport buffer : live) {
                report.append("\n  ").append(buffer.location()).append(", ").append(buffer.sizeBytes()).append(" bytes")
                        .append(buffer.mappedFile() != null ? ", mapped from " + buffer.mappedFile() : "")
                        .append(buffer.allocationSite() != null ? ", allocated at:\n" + buffer.allocationSite() : "");
            }
            LOG.log(System.Logger.Level.WARNING, report.toString());
        }
        for (LocationChain chain : chains.values()) {
            closeChain(chain);
            if (chain.holding.reservedBytes() == 0) {
                chain.top.countAllFreed(); // the buffers left open went back with everything
            }
        }
        mappedFiles.unmapAll();
    }

    /**
     * Closes a chain from its top, then what holds its memory: an application's adaptor that does not close its
     * upstream, or throws while closing, must not keep the pool's memory after the manager is gone. Closing twice is
     * harmless; the pool still keeps memory that device work may use.
     */
    private static void closeChain(LocationChain chain) {
        try {
            chain.top.close();
        } catch (Throwable e) {
            LOG.log(System.Logger.Level.ERROR, "closing the " + chain.backend.location() + " resource chain failed", e);
        }
        try {
            if (chain.pool != null) {
                chain.pool.close();
            } else {
                chain.backend.close();
            }
        } catch (Throwable e) {
            LOG.log(System.Logger.Level.ERROR, "freeing the " + chain.backend.location() + " pool's memory failed", e);
        }
    }
}
