package dev.compute.memory;

import dev.compute.memory.internal.ManagerLog;
import dev.compute.memory.internal.SafeEventListener;
import dev.compute.memory.budget.BudgetLedger;
import dev.compute.memory.jfr.JfrMemoryEvents;
import dev.compute.memory.lifetime.BufferCore;
import dev.compute.memory.lifetime.LeakDetector;
import dev.compute.memory.manager.AllocationWaiters;
import dev.compute.memory.manager.BlockAllocation;
import dev.compute.memory.manager.BlockReturns;
import dev.compute.memory.manager.BufferServices;
import dev.compute.memory.manager.CallGate;
import dev.compute.memory.manager.ChainBuilder;
import dev.compute.memory.manager.Compactor;
import dev.compute.memory.manager.LocationChain;
import dev.compute.memory.manager.LocationChains;
import dev.compute.memory.manager.Maintenance;
import dev.compute.memory.manager.ManagerExtensions;
import dev.compute.memory.manager.ManagerFigures;
import dev.compute.memory.manager.MappedFile;
import dev.compute.memory.manager.MappedFiles;
import dev.compute.memory.manager.Shutdown;
import dev.compute.memory.recording.AllocationRecorder;
import dev.compute.memory.recording.AllocationTrace;
import dev.compute.memory.recording.RecordingOptions;
import dev.compute.memory.resource.Block;
import dev.compute.memory.resource.ReservedRoom;
import dev.compute.memory.spi.ComputeBackend;
import dev.compute.memory.spi.NativeDevice;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.function.Predicate;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;

/**
 * The {@link UnifiedMemoryManager}: the front door, composing the parts that do the work (package
 * {@code dev.compute.memory.manager}): the resource chain of each location, the call gate that makes closing safe,
 * block returns, compaction, maintenance, figures, shutdown, the queues of waiting requests and mapped files. It makes
 * each buffer's core ({@code dev.compute.memory.lifetime}) and the handle users hold, and keeps the budgets.
 */
final class PooledMemoryManager implements UnifiedMemoryManager {

    private static final System.Logger LOG = ManagerLog.logger();

    private final ComputeBackend backend;
    private final ManagerSettings settings;
    private final MemoryEventListener events;
    /** Null when recording is off ({@code compute.memory.recording.enabled=false}): the chains have no recording adaptor. */
    private final @Nullable AllocationRecorder recorder;
    private final CallGate gate = new CallGate();
    private final LocationChains chains;
    private final BlockAllocation allocation;
    private final AllocationWaiters<UnifiedBuffer> waiters;
    private final MappedFiles mappedFiles;
    private final LeakDetector leakDetector;
    private final ManagerFigures figures;
    private final Compactor compactor;
    private final BufferServices buffers;
    private final Maintenance maintenance;
    private final Shutdown shutdown;
    private final ComputeOps ops = new BackendComputeOps(this);
    private final ManagerKernels kernels = new ManagerKernels(this);
    /** The budgets' books; a release looks there only once a budget was made. */
    private final BudgetLedger<BufferCore> budgetLedger;

    /** A manager on {@code backend}, opened for it, with the settings resolved; the backend is closed again if this fails. */
    PooledMemoryManager(ComputeBackend backend, ManagerSettings settings, ManagerExtensions extensions) {
        this.backend = backend;
        this.settings = settings;
        List<MemoryEventListener> listeners = new ArrayList<>(extensions.listeners());
        listeners.add(JfrMemoryEvents.listener());
        this.events = SafeEventListener.of(listeners);
        this.recorder = settings.allocationRecording() ? new AllocationRecorder() : null;
        this.chains = new LocationChains(backend, gate);
        this.waiters = new AllocationWaiters<>((type, location, bytes) -> allocate(type, location, bytes, BlockAllocation.Failure.SILENT),
                UnifiedBuffer::close, events);
        this.allocation = new BlockAllocation(events, waiters);
        this.mappedFiles = new MappedFiles(settings.maxOpenMappedFiles());
        this.leakDetector = new LeakDetector(gate::isClosed, settings.leakDetection(), events);
        this.figures = new ManagerFigures(chains, waiters, mappedFiles, leakDetector);
        this.compactor = new Compactor(chains, gate, backend, figures, waiters, events, settings.releaseThreshold(), settings.deviceWaitTimeout());
        BlockReturns returns = new BlockReturns(chains, gate, compactor, mappedFiles, waiters, this::budgetRelease);
        this.buffers = new BufferServices(gate, backend, chains, allocation, compactor, returns, settings.deviceWaitTimeout(),
                settings.closeTimeout());
        figures.heldFrom(buffers);
        try {
            ChainBuilder.build(chains, backend, settings, handlersOutsideBudgetRequests(extensions), events, recorder, compactor::compactForRoom);
        } catch (RuntimeException e) {
            backend.close();
            throw e;
        }
        this.budgetLedger = budgetLedger(chains, settings);
        for (MemoryLocation location : chains.locations()) {
            chains.open(location).keepAside(new ReservedRoom() {
                @Override
                public Map<Object, Long> reservations() {
                    return budgetLedger.reservations(location);
                }

                @Override
                public @Nullable Object reservingBudget() {
                    return budgetLedger.reservingBudget(location);
                }
            });
        }
        this.maintenance = new Maintenance(settings, gate, chains, compactor, figures, buffers, this::trim);
        this.shutdown = new Shutdown(new Shutdown.Parts(gate, waiters, backend, returns, maintenance, chains, mappedFiles, figures),
                settings.name(), settings.closeTimeout(), this::closeBudgets);
        LOG.log(System.Logger.Level.INFO, "compute memory '" + settings.name() + "' on " + backend.info() + ", locations " + chains.locations()
                + ", default " + settings.defaultLocation() + ", pooling " + (settings.poolingEnabled() ? "on" : "off")
                + ", max-pool-size " + settings.maxPoolSize() + " bytes" + (settings.maxPoolSizeShare() == null ? ""
                : " (" + PoolSize.ofShare(settings.maxPoolSizeShare()) + " of the device's " + backend.memoryInfo().totalBytes() + " bytes)")
                + ", leak detection " + settings.leakDetection());
    }

    // ---- allocation -------------------------------------------------------------------------------------------

    @Override
    public UnifiedBuffer allocate(long bytes, MemoryLocation location) {
        return allocate(DataType.INT8, location, bytes, BlockAllocation.Failure.REPORT);
    }

    @Override
    public UnifiedBuffer allocate(DataType type, long count, MemoryLocation location) {
        return allocate(type, location, BlockAllocation.elementBytes(type, count), BlockAllocation.Failure.REPORT);
    }

    private UnifiedBuffer allocate(DataType type, MemoryLocation location, long bytes, BlockAllocation.Failure failure) {
        return allocate(type, location, bytes, failure, null);
    }

    /** {@code count} elements for a budget, which counts the buffer as {@code budgetCount} (handed back with its memory). */
    UnifiedBuffer allocate(DataType type, long count, MemoryLocation location, Object budgetCount) {
        return allocate(type, location, BlockAllocation.elementBytes(type, count), BlockAllocation.Failure.REPORT, budgetCount);
    }

    private UnifiedBuffer allocate(DataType type, MemoryLocation location, long bytes, BlockAllocation.Failure failure, @Nullable Object budgetCount) {
        if (bytes <= 0) {
            throw new IllegalArgumentException("allocation size must be positive: " + bytes + " bytes");
        }
        int stripe = gate.enter();
        try {
            LocationChain chain = chains.open(location);
            return newBuffer(chain, location, type, bytes, allocation.block(chain, bytes, failure), budgetCount);
        } catch (DeviceOutOfMemoryException e) {
            throw gate.closedDuring(e);
        } finally {
            gate.exit(stripe);
        }
    }

    private UnifiedBuffer newBuffer(LocationChain chain, MemoryLocation location, DataType type, long bytes, Block block,
                                    @Nullable Object budgetCount) {
        BufferCore core = BufferCore.of(buffers, location, chain.hostAccessible(), type, bytes, block, budgetCount);
        UnifiedBuffer buffer = new UnifiedBuffer(this, core);
        compactor.entered(chain, block, core);
        leakDetector.track(buffer, core);
        return buffer;
    }

    @Override
    public CompletableFuture<UnifiedBuffer> allocateAsync(long bytes, MemoryLocation location, Duration timeout) {
        return allocateAsync(DataType.INT8, location, bytes, timeout);
    }

    @Override
    public CompletableFuture<UnifiedBuffer> allocateAsync(DataType type, long count, MemoryLocation location, Duration timeout) {
        return allocateAsync(type, location, BlockAllocation.elementBytes(type, count), timeout);
    }

    private CompletableFuture<UnifiedBuffer> allocateAsync(DataType type, MemoryLocation location, long bytes, Duration timeout) {
        return allocateAsync(type, location, bytes, timeout, timeout, null);
    }

    /**
     * {@link #allocateAsync(DataType, long, MemoryLocation, Duration)} for a budget, on {@code terms} (see
     * {@link AllocationWaiters.BudgetTerms}); {@code asked} is the whole wait its caller asked for, of which
     * {@code timeout} is left, for a timeout's message.
     */
    CompletableFuture<UnifiedBuffer> allocateAsync(DataType type, long count, MemoryLocation location, Duration timeout, Duration asked,
                                                   AllocationWaiters.BudgetTerms<UnifiedBuffer> terms) {
        return allocateAsync(type, location, BlockAllocation.elementBytes(type, count), timeout, asked, terms);
    }

    private CompletableFuture<UnifiedBuffer> allocateAsync(DataType type, MemoryLocation location, long bytes, Duration timeout,
                                                           Duration asked, AllocationWaiters.@Nullable BudgetTerms<UnifiedBuffer> terms) {
        if (bytes <= 0) {
            throw new IllegalArgumentException("allocation size must be positive: " + bytes + " bytes");
        }
        if (Objects.requireNonNull(timeout, "timeout").isNegative()) {
            throw new IllegalArgumentException("the wait for memory must not be negative: " + timeout);
        }
        return waiters.request(type, location, bytes, chains.open(location).largestPossibleBytes(), timeout, asked, terms);
    }

    /** Keeps room in {@code location}'s pool for a new reservation where it fits (see {@link LocationChains#keepAsideWhereItFits}). */
    long keepAsideWhereItFits(MemoryLocation location, Runnable keep, Runnable withdraw) {
        return chains.keepAsideWhereItFits(location, keep, withdraw, events);
    }

    /** A reserving budget has closed: each pool drops what it kept apart for it (its buffers are closed already). */
    void reservationEnded(Object reservation) {
        for (MemoryLocation location : chains.locations()) {
            chains.known(location).endReservation(reservation);
        }
    }

    /** All or none: together where the chain's pool places them so, else one by one, giving back those taken when one fails. */
    @Override
    public List<UnifiedBuffer> allocateBatch(DataType type, long[] counts, MemoryLocation location) {
        return allocateBatch(type, counts, location, null);
    }

    /** {@link #allocateBatch(DataType, long[], MemoryLocation)} for a budget, which counts each buffer as the same element of {@code budgetCounts}. */
    List<UnifiedBuffer> allocateBatch(DataType type, long[] counts, MemoryLocation location, Object @Nullable [] budgetCounts) {
        Objects.requireNonNull(type, "type");
        long[] bytes = BlockAllocation.batchBytes(type, counts, location);
        int stripe = gate.enter();
        try {
            LocationChain chain = chains.open(location);
            List<Block> blocks = allocation.batch(chain, bytes);
            List<UnifiedBuffer> made = new ArrayList<>(blocks.size());
            for (int i = 0; i < blocks.size(); i++) {
                made.add(newBuffer(chain, location, type, bytes[i], blocks.get(i), budgetCounts == null ? null : budgetCounts[i]));
            }
            return List.copyOf(made);
        } catch (DeviceOutOfMemoryException e) {
            throw gate.closedDuring(e);
        } finally {
            gate.exit(stripe);
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
        int stripe = gate.enter();
        try {
            if (!chains.open(MemoryLocation.HOST).hostAccessible()) {
                throw new IllegalStateException("HOST memory of the " + backend.info().backend() + " backend is not host memory: no file can be mapped into it");
            }
            String site = leakDetector.mappingSite();
            MappedFile mapping = mappedFiles.map(file, type, mode, byteOffset, byteLength, site);
            BufferCore core = BufferCore.mapped(buffers, type, mapping, mapping.range());
            UnifiedBuffer buffer = new UnifiedBuffer(this, core);
            leakDetector.trackMapping(buffer, core, site);
            return buffer;
        } finally {
            gate.exit(stripe);
        }
    }

    // ---- budgets ------------------------------------------------------------------------------------------------

    /**
     * The handlers run inside the pool call of the request that ran out, which may be a reserving budget's; what they
     * allocate is not that budget's request and leaves its unused reservation aside ({@link BudgetLedger#suspendRequest}).
     * Only an allocation runs them, once the constructor has made the ledger.
     */
    private ManagerExtensions handlersOutsideBudgetRequests(ManagerExtensions extensions) {
        List<OutOfMemoryHandler> handlers = extensions.outOfMemoryHandlers().stream()
                .<OutOfMemoryHandler>map(handler -> (location, bytes, attempt, failure) -> {
                    Object requesting = budgetLedger.suspendRequest();
                    try {
                        return handler.onOutOfMemory(location, bytes, attempt, failure);
                    } finally {
                        budgetLedger.unmarkRequest(requesting);
                    }
                }).toList();
        return new ManagerExtensions(extensions.listeners(), handlers, extensions.resourceAdaptors());
    }

    /** The books of this manager's budgets, against the cap of each of its locations. */
    private static BudgetLedger<BufferCore> budgetLedger(LocationChains chains, ManagerSettings settings) {
        Map<MemoryLocation, Long> caps = new EnumMap<>(MemoryLocation.class);
        Map<MemoryLocation, Long> largestPossible = new EnumMap<>(MemoryLocation.class);
        Map<MemoryLocation, String> capProperties = new EnumMap<>(MemoryLocation.class);
        for (MemoryLocation location : chains.locations()) {
            caps.put(location, settings.capOf(location));
            largestPossible.put(location, chains.open(location).largestPossibleBytes());
            capProperties.put(location, ManagerSettings.capPropertyOf(location));
        }
        return new BudgetLedger<>(caps, largestPossible, capProperties, settings.deviceWaitTimeout());
    }

    @Override
    public MemoryBudget budget(String name, long limitBytes) {
        return budget(BudgetSpec.of(name, limitBytes));
    }

    @Override
    public MemoryBudget budget(BudgetSpec spec) {
        Objects.requireNonNull(spec, "spec");
        if (gate.isClosed()) {
            throw CallGate.closedManager();
        }
        return new MemoryBudget(this, budgetLedger, null, spec);
    }

    @Override
    public List<MemoryBudget> budgets() {
        return budgetLedger.roots().stream().map(MemoryBudget.class::cast).toList();
    }

    /** A budget's buffer's memory went back to the pool: the budget counts it no more. */
    private void budgetRelease(Object budgetCount) {
        budgetLedger.released(budgetCount);
    }

    /** Every budget closes with the manager; its figures count nothing more where the memory went back with the pools. */
    private void closeBudgets(boolean memoryBack) {
        // those the ledger closed, not those listed before: a budget made meanwhile is closed, and told, too
        for (Object closed : budgetLedger.managerClosed(memoryBack)) {
            ((MemoryBudget) closed).closed();
        }
    }

    /** Throws as an allocation at {@code location} would where this manager has no such location, or is closed. */
    void requireLocation(MemoryLocation location) {
        chains.open(location);
    }

    /** A budget refused a request: the listeners hear of it as of any out-of-memory. */
    /** A budget closed: what it reserved and did not use is room for requests waiting for the pool. */
    void budgetClosed() {
        for (MemoryLocation location : chains.locations()) {
            waiters.roomAppeared(location);
        }
    }

    void budgetRefused(MemoryLocation location, long bytes) {
        events.allocationFailed(location, bytes, OutOfMemoryReason.BUDGET_LIMIT);
    }

    // ---- what buffers, budgets and ops use ----------------------------------------------------------------------------

    ComputeBackend computeBackend() {
        return backend;
    }

    /**
     * Runs {@code body} as a call of this manager, which a close waits for before it frees anything or closes the
     * backend: for a kernel launch, whose backend work and Java kernel body use the memory and the device's objects
     * between the accesses it opens and ends. Refused once closed, with the caller's {@code refusal}.
     */
    <T> T call(Supplier<? extends RuntimeException> refusal, Supplier<T> body) {
        int stripe;
        try {
            stripe = gate.enter();
        } catch (IllegalStateException closed) { // the close came after the caller's own look
            throw refusal.get();
        }
        try {
            return body.get();
        } finally {
            gate.exit(stripe);
        }
    }

    /** The longest a call waits for device work it depends on. */
    Duration deviceWaitTimeout() {
        return settings.deviceWaitTimeout();
    }

    // ---- figures ------------------------------------------------------------------------------------------------

    @Override
    public MemoryLocation defaultLocation() {
        return settings.defaultLocation();
    }

    @Override
    public List<MemoryLocation> locations() {
        return chains.locations();
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

    @Override
    public MemoryStatistics statistics(MemoryLocation location) {
        return figures.statistics(location);
    }

    @Override
    public Map<MemoryLocation, MemoryStatistics> statistics() {
        return figures.statistics();
    }

    @Override
    public MappedFileStatistics mappedFileStatistics() {
        return mappedFiles.statistics();
    }

    @Override
    public MemorySnapshot snapshot(MemoryLocation location) {
        return figures.snapshot(location);
    }

    @Override
    public List<MemoryTimeline.Sample> timeline(MemoryLocation location) {
        return figures.timeline(location);
    }

    @Override
    public List<LiveBufferReport> liveBuffers() {
        return figures.liveBuffers();
    }

    @Override
    public long leaksDetected() {
        return leakDetector.leaksReported();
    }

    // ---- trim and compaction ------------------------------------------------------------------------------------------

    @Override
    public long trim() {
        return trimAll(settings.releaseThreshold());
    }

    @Override
    public long releaseCachedMemory() {
        return trimAll(0);
    }

    private long trimAll(long keepBytes) {
        return chains.trimAll(keepBytes, events);
    }

    @Override
    public CompactionReport compact(MemoryLocation location) {
        return compactor.compact(location);
    }

    @Override
    public List<CompactionReport> compact() {
        return compactor.compactAll();
    }

    // ---- recording ----------------------------------------------------------------------------------------------

    @Override
    public void startRecording(RecordingOptions options) {
        Objects.requireNonNull(options, "options");
        AllocationRecorder on = recorder();
        if (gate.isClosed()) {
            throw CallGate.closedManager();
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
    public Kernels kernels() {
        return kernels;
    }

    @Override
    public <T extends NativeDevice> T nativeDevice(Class<T> type) {
        return kernels.nativeDevice(type);
    }

    // ---- close --------------------------------------------------------------------------------------------------

    @Override
    public boolean isClosed() {
        return gate.isClosed();
    }

    /** See {@code manager.Shutdown}: nothing is freed that a thread can still reach, and every wait is bounded. */
    @Override
    public void close() {
        shutdown.close();
    }
}
