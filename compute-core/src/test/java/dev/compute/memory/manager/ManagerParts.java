package dev.compute.memory.manager;

import dev.compute.memory.CompactionReport;
import dev.compute.memory.DataType;
import dev.compute.memory.ManagerSettings;
import dev.compute.memory.MemoryEventListener;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.OutOfMemoryHandler;
import dev.compute.memory.OutOfMemoryReason;
import dev.compute.memory.ResolvedSettings;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.UnifiedMemoryManagerBuilder;
import dev.compute.memory.lifetime.BufferCore;
import dev.compute.memory.lifetime.LeakDetector;
import dev.compute.memory.resource.Block;
import dev.compute.memory.resource.ResourceAdaptor;
import dev.compute.memory.spi.ComputeBackend;
import dev.compute.memory.testing.LogCapture;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.UnaryOperator;

/**
 * The parts of a manager, composed as {@code PooledMemoryManager} composes them, without its front door: for the tests
 * of one part at a time, which call the part's own API and read the others' figures. Settings come from the real
 * builder ({@link ResolvedSettings}); scheduled trims and timeline samples are off unless a test turns them on. Blocks
 * are handed out as the manager's allocation does, and buffers are cores over them ({@link #buffer}).
 */
final class ManagerParts implements AutoCloseable {

    /** What the listeners were told. */
    static final class Events implements MemoryEventListener {
        record Failure(MemoryLocation location, long bytes, OutOfMemoryReason reason) {}

        record Trim(MemoryLocation location, long bytes) {}

        final List<Failure> failures = new CopyOnWriteArrayList<>();
        final List<Trim> trims = new CopyOnWriteArrayList<>();
        final List<CompactionReport> compactions = new CopyOnWriteArrayList<>();
        final List<RecoveryOutcome> recoveries = new CopyOnWriteArrayList<>();

        @Override
        public void allocationFailed(MemoryLocation location, long requestedBytes, OutOfMemoryReason reason) {
            failures.add(new Failure(location, requestedBytes, reason));
        }

        @Override
        public void trimmed(MemoryLocation location, long releasedBytes) {
            trims.add(new Trim(location, releasedBytes));
        }

        @Override
        public void compacted(CompactionReport report) {
            compactions.add(report);
        }

        @Override
        public void outOfMemoryRecovery(MemoryLocation location, long requestedBytes, RecoveryOutcome outcome, long nanos) {
            recoveries.add(outcome);
        }
    }

    /** How a test builds its parts: the backend, the builder's settings, and what the application plugs in. */
    static final class Recipe {
        final ComputeBackend backend;
        UnaryOperator<UnifiedMemoryManagerBuilder> settings = builder -> builder;
        final List<ResourceAdaptor> adaptors = new ArrayList<>();
        final List<OutOfMemoryHandler> handlers = new ArrayList<>();

        Recipe(ComputeBackend backend) {
            this.backend = backend;
        }

        Recipe settings(UnaryOperator<UnifiedMemoryManagerBuilder> settings) {
            this.settings = settings;
            return this;
        }

        Recipe adaptor(ResourceAdaptor adaptor) {
            adaptors.add(adaptor);
            return this;
        }

        Recipe handler(OutOfMemoryHandler handler) {
            handlers.add(handler);
            return this;
        }

        ManagerParts build() {
            return new ManagerParts(this);
        }
    }

    final ComputeBackend backend;
    final ManagerSettings settings;
    final Events events = new Events();
    final CallGate gate = new CallGate();
    final LocationChains chains;
    final BlockAllocation allocation;
    final AllocationWaiters<Block> waiters;
    final MappedFiles mappedFiles;
    final LeakDetector leakDetector;
    final ManagerFigures figures;
    final Compactor compactor;
    /** What budgets were told went back (what they count each buffer by), in order. */
    final List<Object> budgetReleases = new CopyOnWriteArrayList<>();
    final BlockReturns returns;
    final BufferServices services;
    final Maintenance maintenance;
    /** What the budgets were told at close: whether the memory went back. */
    final List<Boolean> budgetsClosed = new CopyOnWriteArrayList<>();
    final Shutdown shutdown;

    static Recipe on(ComputeBackend backend) {
        return new Recipe(backend);
    }

    private ManagerParts(Recipe recipe) {
        backend = recipe.backend;
        UnifiedMemoryManagerBuilder builder = UnifiedMemoryManager.builder().timelineInterval(Duration.ZERO).trimInterval(Duration.ZERO);
        settings = ResolvedSettings.of(recipe.settings.apply(builder), backend);
        chains = new LocationChains(backend, gate);
        waiters = new AllocationWaiters<>((type, location, bytes) -> allocation().block(chains.open(location), bytes, BlockAllocation.Failure.SILENT),
                block -> returns().release(block.segment().location(), block, null, CompletableFuture.completedFuture(null), null), events);
        allocation = new BlockAllocation(events, waiters);
        mappedFiles = new MappedFiles(settings.maxOpenMappedFiles());
        leakDetector = new LeakDetector(gate::isClosed, settings.leakDetection(), events);
        figures = new ManagerFigures(chains, waiters, mappedFiles, leakDetector);
        compactor = new Compactor(chains, gate, backend, figures, waiters, events, settings.releaseThreshold(), settings.deviceWaitTimeout());
        returns = new BlockReturns(chains, gate, compactor, mappedFiles, waiters, budgetReleases::add);
        services = new BufferServices(gate, backend, chains, allocation, compactor, returns, settings.deviceWaitTimeout(), settings.closeTimeout());
        figures.heldFrom(services);
        ChainBuilder.build(chains, backend, settings, new ManagerExtensions(List.of(), recipe.handlers, recipe.adaptors), events, null,
                compactor::compactForRoom);
        maintenance = new Maintenance(settings, gate, chains, compactor, figures, services, () -> chains.trimAll(settings.releaseThreshold(), events));
        shutdown = new Shutdown(new Shutdown.Parts(gate, waiters, backend, returns, maintenance, chains, mappedFiles, figures),
                settings.name(), settings.closeTimeout(), budgetsClosed::add);
    }

    private BlockReturns returns() {
        return returns;
    }

    private BlockAllocation allocation() {
        return allocation;
    }

    /** A block at {@code location}, as the manager allocates one. */
    Block block(MemoryLocation location, long bytes) {
        return allocation.block(chains.open(location), bytes, BlockAllocation.Failure.REPORT);
    }

    /** A buffer's core over a new block, entered in the compaction registry as the manager enters a new buffer. */
    BufferCore buffer(MemoryLocation location, long bytes) {
        LocationChain chain = chains.open(location);
        Block block = allocation.block(chain, bytes, BlockAllocation.Failure.REPORT);
        BufferCore core = BufferCore.of(services, location, DataType.INT8, bytes, block);
        compactor.entered(chain, block, core);
        return core;
    }

    /**
     * Closes as the manager does; where a test closed the gate itself, frees the pools and the backend directly. The
     * close's report of the blocks a test left open is expected, and kept out of the output.
     */
    @Override
    public void close() {
        try (LogCapture ignored = LogCapture.managerLog()) {
            if (gate.isClosed() && budgetsClosed.isEmpty()) {
                maintenance.stop();
                chains.closeAll();
                backend.close();
            } else {
                shutdown.close();
            }
        }
    }
}
