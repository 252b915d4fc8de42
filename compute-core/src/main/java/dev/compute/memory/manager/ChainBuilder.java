package dev.compute.memory.manager;

import dev.compute.memory.InvalidSettingException;
import dev.compute.memory.ManagerSettings;
import dev.compute.memory.MemoryEventListener;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemoryTimeline;
import dev.compute.memory.OutOfMemoryHandler;
import dev.compute.memory.WarmupBlocks;
import dev.compute.memory.internal.ManagerLog;
import dev.compute.memory.recording.AllocationRecorder;
import dev.compute.memory.recording.RecordingResource;
import dev.compute.memory.resource.BackendResource;
import dev.compute.memory.resource.FailureCallbackResource;
import dev.compute.memory.resource.MemoryResource;
import dev.compute.memory.resource.PoolSettings;
import dev.compute.memory.resource.ResourceAdaptor;
import dev.compute.memory.resource.StatisticsResource;
import dev.compute.memory.resource.pool.CachingPoolResource;
import dev.compute.memory.spi.BackendSelection;
import dev.compute.memory.spi.BackendSettings;
import dev.compute.memory.spi.ComputeBackend;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeSet;
import org.jspecify.annotations.Nullable;

/**
 * Opens the backend and builds the chain of every location it offers, as the settings say, then warms the pools up.
 * A chain, top-down: the recording adaptor (unless recording is off), the statistics, the application's out-of-memory
 * handlers (where there are any), the compaction on out-of-memory (with pooling on, no adaptors of the application's,
 * and {@code compact-on-out-of-memory}; an adaptor of its own, so that its one try does not take a handler's retry),
 * the application's adaptors in the order given, the caching pool (unless pooling is off), and the backend's resource
 * with the location's cap.
 */
public final class ChainBuilder {

    private static final System.Logger LOG = ManagerLog.logger();

    private ChainBuilder() {}

    /** The backend given, or the provider {@code name} picks ({@code auto}: the best available), opened. */
    public static ComputeBackend openBackend(String name, @Nullable ComputeBackend instance, BackendSettings settings) {
        if (instance != null) {
            return instance;
        }
        BackendSelection selection = BackendSelection.choose(name, settings, BackendSelection.providers());
        LOG.log(System.Logger.Level.INFO, "compute backend '" + selection.provider().name() + "' chosen: " + selection.detail()
                + (selection.passedOver().isEmpty() ? "" : "; passed over: " + selection.passedOver()));
        List<String> unread = BackendSelection.unreadOptions(selection.provider(), settings);
        if (!unread.isEmpty()) { // a named backend refused them already: auto chose this one, and they may be another's
            LOG.log(System.Logger.Level.WARNING, "backend options " + unread + " are not read by the '" + selection.provider().name()
                    + "' backend, which compute.backend=auto chose: it reads " + new TreeSet<>(Objects.requireNonNull(selection.provider().options())));
        }
        return selection.provider().create(settings);
    }

    /**
     * Adds to {@code chains} the chain of every location the backend offers (PINNED only with pinning on), warmed up;
     * the default location checked against them. What was built is closed again when a later step fails.
     */
    public static void build(LocationChains chains, ComputeBackend backend, ManagerSettings settings, ManagerExtensions extensions,
                      MemoryEventListener events, @Nullable AllocationRecorder recorder, OutOfMemoryHandler compaction) {
        try {
            for (MemoryLocation location : MemoryLocation.values()) {
                if (location == MemoryLocation.PINNED && !settings.pinningEnabled()) {
                    continue;
                }
                if (backend.supports(location).available()) {
                    chains.add(location, chain(backend, location, settings, extensions, events, recorder, compaction));
                }
            }
            if (!chains.offered().contains(settings.defaultLocation())) {
                throw new InvalidSettingException("compute.memory.default-location", settings.defaultLocation(),
                        "a location this backend (" + backend.info().backend() + ") offers: auto or one of " + chains.locations());
            }
            warmUp(chains, settings.warmup(), settings.releaseThreshold(), backend);
        } catch (RuntimeException e) {
            chains.closeAll();
            throw e;
        }
    }

    /**
     * A release threshold under the page size is allowed (zero gives back every free page) but cannot be met exactly: a
     * trim unmaps whole free pages, and a page that still holds a live block, however small, stays mapped.
     */
    private static void explainThresholdUnderPage(MemoryLocation location, long releaseThreshold, long pageBytes) {
        if (releaseThreshold > 0 && releaseThreshold < pageBytes) {
            LOG.log(System.Logger.Level.INFO, "compute.memory.pooling.release-threshold (" + releaseThreshold + " bytes) is under the page size at "
                    + location + " (" + pageBytes + " bytes): the pool maps and unmaps whole pages, so a trim gives back free pages only, and"
                    + " a page that holds any open buffer stays mapped; cached memory can stay above the threshold by up to a page per segment");
        }
    }

    /**
     * An expandable segment maps whole pages: under a cap smaller than one page no allocation could succeed, as under a
     * cap below the least a plain segment takes (which the builder refuses before the backend is open).
     */
    private static void requirePageUnderCap(MemoryLocation location, long cap, long pageBytes) {
        if (cap < pageBytes) {
            throw new InvalidSettingException(ManagerSettings.capPropertyOf(location), cap + " bytes", "at least the page size at " + location
                    + " (" + pageBytes + " bytes) while expandable segments are on: a segment maps whole pages, so under a smaller cap no"
                    + " allocation could succeed; raise it, use smaller pages (a backend option, such as the cpu backend's page-size),"
                    + " or turn expandable segments off (compute.memory.pooling.expandable-segments=false)");
        }
    }

    private static LocationChain chain(ComputeBackend backend, MemoryLocation location, ManagerSettings settings,
                                       ManagerExtensions extensions, MemoryEventListener events, @Nullable AllocationRecorder recorder,
                                       OutOfMemoryHandler compaction) {
        BackendResource upstream = new BackendResource(backend, location, settings.capOf(location), ManagerSettings.capPropertyOf(location),
                settings.deviceWaitTimeout(), events);
        CachingPoolResource pool = null;
        MemoryResource chain = upstream;
        if (settings.poolingEnabled()) {
            if (settings.expandableSegments()) {
                backend.virtualMemory(location).ifPresent(pages -> {
                    requirePageUnderCap(location, settings.capOf(location), pages.granularity());
                    explainThresholdUnderPage(location, settings.releaseThreshold(), pages.granularity());
                });
            }
            PoolSettings layout = settings.expandableSegments() ? PoolSettings.expandable() : PoolSettings.plainSegments();
            pool = new CachingPoolResource(upstream, layout.withDeviceWaitTimeout(settings.deviceWaitTimeout()), events);
            chain = pool;
        }
        for (ResourceAdaptor adaptor : extensions.resourceAdaptors()) {
            MemoryResource wrapped = adaptor.wrap(chain, location);
            if (wrapped == null) {
                throw new IllegalStateException("the resource adaptor " + adaptor + " returned no resource for " + location
                        + ": it must return one that wraps the upstream it was given");
            }
            chain = wrapped;
        }
        boolean composed = !extensions.resourceAdaptors().isEmpty();
        if (pool != null && !composed && settings.compactOnOutOfMemory()) {
            chain = new FailureCallbackResource(chain, location, List.of(compaction), 1, events);
        }
        if (!extensions.outOfMemoryHandlers().isEmpty()) {
            chain = new FailureCallbackResource(chain, location, extensions.outOfMemoryHandlers(), settings.outOfMemoryRetries(), events);
        }
        StatisticsResource statistics = new StatisticsResource(chain);
        MemoryResource entry = recorder != null ? new RecordingResource(statistics, location, recorder) : statistics;
        return new LocationChain(entry, statistics, pool, upstream, new MemoryTimeline(settings.timelineCapacity()),
                backend.hostAccessible(location), composed ? LocationChain.Adaptors.COMPOSED : LocationChain.Adaptors.NONE);
    }

    /** Each location's warm-up ({@link PoolWarmup}); a location this manager lacks is a bad setting. */
    private static void warmUp(LocationChains chains, Map<MemoryLocation, List<WarmupBlocks>> warmup, long releaseThreshold,
                               ComputeBackend backend) {
        warmup.forEach((location, blocks) -> {
            LocationChain chain = chains.of(location);
            if (chain == null || chain.pool == null) {
                throw new InvalidSettingException(PoolWarmup.property(location), blocks,
                        "a warm-up of a location this backend (" + backend.info().backend() + ") offers: one of " + chains.offered());
            }
            PoolWarmup.warm(chain.pool, blocks, releaseThreshold);
        });
    }
}
