package dev.compute.boot.actuate.metrics;

import dev.compute.boot.ComputeBudgets;
import dev.compute.boot.MemoryEventRelays;
import dev.compute.boot.actuate.ObservedManagers;
import dev.compute.boot.actuate.ObservedManagers.ObservedManager;
import dev.compute.boot.actuate.RecentMemoryStatistics;
import dev.compute.memory.BackendInfo;
import dev.compute.memory.BudgetStatistics;
import dev.compute.memory.DeviceMemoryInfo;
import dev.compute.memory.MappedFileStatistics;
import dev.compute.memory.MemoryBudget;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemoryStatistics;
import dev.compute.memory.UnifiedMemoryManager;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.binder.MeterBinder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.function.ToDoubleFunction;
import org.jspecify.annotations.Nullable;

/**
 * The meters of {@link ComputeMeters} for every observed manager, tagged with its name, backend and device. Sizes
 * have base unit bytes, so Prometheus shows {@code compute_memory_reserved_bytes}; totals since start are function
 * counters ({@code compute_memory_pool_hits_total}); the two fragmentation figures are ratios
 * ({@code compute_memory_fragmentation_ratio}). The figure meters read the manager's one collection of figures that
 * is at most a second old ({@link RecentMemoryStatistics}), so a scrape of every meter collects them once; after the
 * manager closed they read what its close left (nothing, once it freed everything) and its totals, its caps 0 and its
 * device NaN (no value), so that sums over the managers stay numbers. The event meters ({@link MemoryEventMeters})
 * hear the managers the starter built, through their {@link MemoryEventRelays.Relay}. The budget meters cover the configured budgets ({@link ComputeBudgets})
 * only, tagged with the budget's name: a bounded set, whatever budgets requests and tasks open and close; each reads the
 * figures of the name's budget at most once a second. Once that budget closes its meters read what it left for
 * {@link #CLOSED_BUDGET_METERS_GRACE} (at most twice that: one sweep removes them) and are then removed, unless a budget of its name came back meanwhile: that one
 * takes the meters over. Closing the binder (with the context, before the managers close) detaches them and removes
 * every meter it registered.
 */
public class ComputeMemoryMeterBinder implements MeterBinder, AutoCloseable {

    private final ObservedManagers managers;
    private final MemoryEventRelays relays;
    private final ComputeBudgets budgets;
    private final Executor afterGrace;
    private final List<Bound> bound = new CopyOnWriteArrayList<>();

    /**
     * How long the meters of a closed budget stay, reading what it left, before they are removed. A budget of its name
     * added meanwhile takes them over: were they removed and registered again under the same name and tags, a
     * Prometheus scrape running then could see both and fail (micrometer-metrics/micrometer#6851, unfixed in 1.17).
     */
    static final Duration CLOSED_BUDGET_METERS_GRACE = Duration.ofSeconds(60);

    private record Bound(MeterRegistry registry, List<Meter> meters, List<AutoCloseable> listeners, BudgetMeters budgetMeters) {}

    public ComputeMemoryMeterBinder(ObservedManagers managers, MemoryEventRelays relays) {
        this(managers, relays, new ComputeBudgets());
    }

    /** With the budgets the starter configured, each metered under its name. */
    public ComputeMemoryMeterBinder(ObservedManagers managers, MemoryEventRelays relays, ComputeBudgets budgets) {
        this(managers, relays, budgets, CompletableFuture.delayedExecutor(CLOSED_BUDGET_METERS_GRACE.toMillis(), TimeUnit.MILLISECONDS));
    }

    /** {@code afterGrace} runs each sweep of closed budgets' meters once the grace is over: a test's, when it says so. */
    ComputeMemoryMeterBinder(ObservedManagers managers, MemoryEventRelays relays, ComputeBudgets budgets, Executor afterGrace) {
        this.managers = managers;
        this.relays = relays;
        this.budgets = budgets;
        this.afterGrace = afterGrace;
    }

    @Override
    public void bindTo(MeterRegistry registry) {
        refuseMetersOfAnotherContext(registry);
        List<Meter> meters = new ArrayList<>();
        List<AutoCloseable> listeners = new ArrayList<>();
        BudgetMeters budgetMeters = new BudgetMeters(registry, afterGrace);
        // first, so that no budget added meanwhile is missed (one metered twice keeps the meters it has)
        listeners.add(budgets.onAdded(configured -> managers.get(configured.manager())
                .ifPresent(observed -> budgetMeters.meter(configured, tagsOf(observed)))));
        // a closed budget: its meters go after the grace, so that closed tenants leave none behind
        listeners.add(budgets.onRemoved(budgetMeters::closed));
        for (ObservedManager observed : managers.all()) {
            UnifiedMemoryManager manager = observed.manager();
            RecentMemoryStatistics statistics = observed.statistics();
            Tags tags = tagsOf(observed);
            // The leak detector counts for the whole manager, and the device is the manager's: no location tag.
            meters.add(FunctionCounter.builder(ComputeMeters.LEAKS.getName(), manager, UnifiedMemoryManager::leaksDetected)
                    .tags(tags).description(ComputeMeters.LEAKS.description()).register(registry));
            // mapped files are the manager's, counted apart from its locations: no location tag either
            meters.add(mappedGauge(registry, ComputeMeters.MAPPED_FILES, observed, tags, MappedFileStatistics::openMappings));
            meters.add(mappedGauge(registry, ComputeMeters.MAPPED, observed, tags, MappedFileStatistics::mappedBytes));
            meters.add(mappedGauge(registry, ComputeMeters.MAPPED_PEAK, observed, tags, MappedFileStatistics::mappedBytesPeak));
            meters.add(mappedGauge(registry, ComputeMeters.MAPPED_FILES_MAX, observed, tags, MappedFileStatistics::maxOpenMappings));
            meters.add(FunctionCounter.builder(ComputeMeters.MAPPINGS.getName(), manager, m -> statistics.mappedFiles().mappings())
                    .tags(tags).description(ComputeMeters.MAPPINGS.description()).register(registry));
            meters.add(deviceGauge(registry, ComputeMeters.DEVICE_MEMORY_TOTAL, observed, tags, DeviceMemoryInfo::totalBytes));
            meters.add(deviceGauge(registry, ComputeMeters.DEVICE_MEMORY_FREE, observed, tags, DeviceMemoryInfo::freeBytes));
            for (MemoryLocation location : manager.locations()) {
                Tags at = tags.and(ComputeMeters.Tag.LOCATION.asString(), tagValue(location));
                Figures figures = new Figures(registry, observed, location, at, meters);
                figures.gauge(ComputeMeters.RESERVED, MemoryStatistics::reservedBytes);
                figures.gauge(ComputeMeters.RESERVED_PEAK, MemoryStatistics::reservedBytesPeak);
                figures.gauge(ComputeMeters.ALLOCATED, MemoryStatistics::allocatedBytes);
                figures.gauge(ComputeMeters.ALLOCATED_PEAK, MemoryStatistics::allocatedBytesPeak);
                figures.gauge(ComputeMeters.REQUESTED, MemoryStatistics::requestedBytes);
                figures.gauge(ComputeMeters.CACHED, MemoryStatistics::cachedBytes);
                figures.gauge(ComputeMeters.LARGEST_FREE_BLOCK, MemoryStatistics::largestFreeBlockBytes);
                figures.gauge(ComputeMeters.RESERVATIONS_CACHED, MemoryStatistics::reservationsCachedBytes);
                figures.gauge(ComputeMeters.FRAGMENTATION, MemoryStatistics::fragmentation);
                figures.gauge(ComputeMeters.OVERHEAD, MemoryStatistics::overhead);
                figures.gauge(ComputeMeters.LIVE_BUFFERS, MemoryStatistics::liveBuffers);
                figures.gauge(ComputeMeters.HELD, MemoryStatistics::heldBytes);
                figures.gauge(ComputeMeters.HELD_BUFFERS, MemoryStatistics::heldBuffers);
                figures.gauge(ComputeMeters.SEGMENTS, MemoryStatistics::segments);
                figures.gauge(ComputeMeters.WAITING, MemoryStatistics::waitingRequests);
                figures.counter(ComputeMeters.ALLOCATIONS, MemoryStatistics::allocations);
                figures.counter(ComputeMeters.FREES, MemoryStatistics::frees);
                figures.counter(ComputeMeters.POOL_HITS, MemoryStatistics::poolHits);
                figures.counter(ComputeMeters.POOL_MISSES, MemoryStatistics::poolMisses);
                figures.counter(ComputeMeters.BACKEND_ALLOCATIONS, MemoryStatistics::backendAllocations);
                figures.counter(ComputeMeters.BACKEND_FREES, MemoryStatistics::backendFrees);
                figures.counter(ComputeMeters.OOM_RETRIES, MemoryStatistics::oomRetries);
                figures.counter(ComputeMeters.TRIMS, MemoryStatistics::trims);
                figures.counter(ComputeMeters.WAITS, MemoryStatistics::waits);
                figures.counter(ComputeMeters.WAIT_TIMEOUTS, MemoryStatistics::waitTimeouts);
                figures.copied("host-to-device", MemoryStatistics::bytesHostToDevice);
                figures.copied("device-to-host", MemoryStatistics::bytesDeviceToHost);
                figures.copied("device-to-device", MemoryStatistics::bytesDeviceToDevice);
                long cap = manager.settings().capOf(location);
                // a closed manager reserves nothing more
                meters.add(Gauge.builder(ComputeMeters.CAP.getName(), manager, m -> m.isClosed() ? 0 : cap)
                        .baseUnit(ComputeMeters.CAP.getBaseUnit()).tags(at).description(ComputeMeters.CAP.description()).register(registry));
            }
            for (ComputeBudgets.Configured configured : budgets.all()) {
                if (configured.manager().equals(observed.name())) {
                    budgetMeters.meter(configured, tags);
                }
            }
            relays.of(manager).ifPresent(relay -> {
                MemoryEventMeters events = new MemoryEventMeters(registry, tags, manager.locations());
                meters.addAll(events.meters());
                listeners.add(relay.attach(events));
            });
        }
        bound.add(new Bound(registry, meters, listeners, budgetMeters));
    }

    /**
     * Micrometer keeps one meter per name and tags: where another context (given the same registry) has metered a
     * manager of the same name, backend and device, this one's meters would be that one's, reading the other manager,
     * and would go when that context closes. Refused before any is registered.
     */
    private void refuseMetersOfAnotherContext(MeterRegistry registry) {
        for (ObservedManager observed : managers.all()) {
            Meter existing = registry.find(ComputeMeters.LEAKS.getName()).tags(tagsOf(observed)).meter();
            if (existing != null && bound.stream().noneMatch(each -> each.registry() == registry && each.meters().contains(existing))) {
                BackendInfo info = observed.manager().backendInfo();
                throw new IllegalStateException("The MeterRegistry already has the compute meters of a manager named '" + observed.name()
                        + "' (backend " + info.backend() + ", device " + info.deviceIndex() + ") that this application context did not"
                        + " register: another context shares the registry, and the two managers' meters would be one. Give each context its"
                        + " own MeterRegistry, or the managers names of their own (compute.managers.<name>)");
            }
        }
    }

    private static Tags tagsOf(ObservedManager observed) {
        BackendInfo info = observed.manager().backendInfo();
        return Tags.of(ComputeMeters.Tag.NAME.asString(), observed.name(), ComputeMeters.Tag.BACKEND.asString(), info.backend(),
                ComputeMeters.Tag.DEVICE.asString(), Integer.toString(info.deviceIndex()));
    }

    /** Detaches the event meters and removes every meter registered, from every registry bound to. */
    @Override
    public void close() throws Exception {
        for (Bound each : bound) {
            for (AutoCloseable listener : each.listeners()) {
                listener.close();
            }
            each.meters().forEach(each.registry()::remove);
            each.budgetMeters().removeAll();
        }
        bound.clear();
    }

    /**
     * The budget meters of one registry, one set per configured budget's name (and manager), each reading the name's
     * budget through its {@link NameMeters}. Guarded by its map: budgets are added and closed on any thread.
     *
     * <p>One sweep at a time removes closed budgets' meters, not a task per close: budgets that come and go fast (a
     * tenant per job, added and closed thousands of times a minute) would otherwise leave a task per close waiting out
     * the grace, each holding the closed budget. The sweep waiting ({@link #sweeping}) removes the meters of the budgets
     * that closed before it was started, once the grace is over, unless a budget of the name took them over; those that
     * closed meanwhile ({@link #closedSince}) wait for the next sweep, which it starts. So a closed budget's meters go
     * between one and two graces after its close, and each name waits once, however often it closed.
     */
    private static final class BudgetMeters {

        private final MeterRegistry registry;
        private final Executor afterGrace;
        private final Map<List<String>, NameMeters> byName = new HashMap<>();
        /** Budgets closed since the waiting sweep started, by name: the last of each, which the next sweep removes. */
        private Map<List<String>, MemoryBudget> closedSince = new HashMap<>();
        private boolean sweeping;
        private boolean removed;

        BudgetMeters(MeterRegistry registry, Executor afterGrace) {
            this.registry = registry;
            this.afterGrace = afterGrace;
        }

        /** Meters {@code configured}'s budget: with the meters of its name where they are still registered, else new ones. */
        void meter(ComputeBudgets.Configured configured, Tags managerTags) {
            MemoryBudget budget = configured.budget();
            synchronized (byName) {
                // closed before it is metered: its close is told (or was) before a budget of its name can come back, and
                // would find no meters of it to remove; a budget of its name may read through the meters already
                if (removed || budget.isClosed()) {
                    return;
                }
                NameMeters existing = byName.get(keyOf(configured));
                if (existing != null) {
                    existing.rebind(budget);
                    return;
                }
                NameMeters meters = new NameMeters(budget);
                meters.register(registry, managerTags.and(ComputeMeters.Tag.BUDGET.asString(), configured.name()));
                byName.put(keyOf(configured), meters);
            }
        }

        /** {@code gone}'s budget closed: its meters go after the grace, unless a budget of its name reads through them by then. */
        void closed(ComputeBudgets.Configured gone) {
            synchronized (byName) {
                NameMeters meters = byName.get(keyOf(gone));
                if (removed || meters == null || !meters.reads(gone.budget())) { // a budget of its name took them over already
                    return;
                }
                closedSince.put(keyOf(gone), gone.budget());
                if (!sweeping) {
                    startSweep();
                }
            }
        }

        /** Starts the sweep of the budgets closed so far, which runs once the grace is over. Under the map's lock. */
        private void startSweep() {
            Map<List<String>, MemoryBudget> closed = closedSince;
            closedSince = new HashMap<>();
            sweeping = true;
            afterGrace.execute(() -> sweep(closed));
        }

        private void sweep(Map<List<String>, MemoryBudget> closed) {
            synchronized (byName) {
                if (removed) {
                    return;
                }
                closed.forEach((key, budget) -> {
                    NameMeters meters = byName.get(key);
                    if (meters != null && meters.reads(budget)) {
                        byName.remove(key);
                        meters.meters.forEach(registry::remove);
                    }
                });
                sweeping = false;
                if (!closedSince.isEmpty()) {
                    startSweep();
                }
            }
        }

        /** Removes every budget meter, for good: none is registered after. */
        void removeAll() {
            synchronized (byName) {
                removed = true;
                byName.values().forEach(meters -> meters.meters.forEach(registry::remove));
                byName.clear();
                closedSince.clear();
            }
        }

        private static List<String> keyOf(ComputeBudgets.Configured configured) {
            return List.of(configured.manager(), configured.name());
        }
    }

    /**
     * The meters of a configured budget's name, reading its budget: the one that closed until a budget of the name
     * comes back, and then the new one. Its counters count from the new budget's totals then, which is a counter reset
     * (Prometheus's rate and increase take it as one).
     */
    private static final class NameMeters {

        private final List<Meter> meters = new ArrayList<>();
        private volatile RecentBudgetStatistics recent;

        NameMeters(MemoryBudget budget) {
            this.recent = new RecentBudgetStatistics(budget);
        }

        boolean reads(MemoryBudget budget) {
            return recent.budget == budget;
        }

        void rebind(MemoryBudget budget) {
            if (!reads(budget)) {
                recent = new RecentBudgetStatistics(budget);
            }
        }

        void register(MeterRegistry registry, Tags tags) {
            gauge(registry, ComputeMeters.BUDGET_ALLOCATED, tags, BudgetStatistics::allocatedBytes);
            gauge(registry, ComputeMeters.BUDGET_ALLOCATED_PEAK, tags, BudgetStatistics::allocatedBytesPeak);
            gauge(registry, ComputeMeters.BUDGET_LIMIT, tags, BudgetStatistics::limitBytes);
            gauge(registry, ComputeMeters.BUDGET_RESERVED, tags, BudgetStatistics::reservedBytes);
            gauge(registry, ComputeMeters.BUDGET_LIVE_BUFFERS, tags, BudgetStatistics::liveBuffers);
            meters.add(Gauge.builder(ComputeMeters.BUDGET_WAITING.getName(), this, of -> of.recent.waitingInAll())
                    .baseUnit(ComputeMeters.BUDGET_WAITING.getBaseUnit()).tags(tags).description(ComputeMeters.BUDGET_WAITING.description())
                    .register(registry));
            counter(registry, ComputeMeters.BUDGET_ALLOCATIONS, tags, BudgetStatistics::allocations);
            counter(registry, ComputeMeters.BUDGET_REFUSALS, tags, BudgetStatistics::refusals);
        }

        // Each meter holds this only weakly (as it does whatever it reads): the binder holds it while the meters are registered.
        private void gauge(MeterRegistry registry, ComputeMeters meter, Tags tags, ToDoubleFunction<BudgetStatistics> figure) {
            meters.add(Gauge.builder(meter.getName(), this, of -> of.recent.read(figure)).baseUnit(meter.getBaseUnit()).tags(tags)
                    .description(meter.description()).register(registry));
        }

        private void counter(MeterRegistry registry, ComputeMeters meter, Tags tags, ToDoubleFunction<BudgetStatistics> figure) {
            meters.add(FunctionCounter.builder(meter.getName(), this, of -> of.recent.read(figure)).baseUnit(meter.getBaseUnit()).tags(tags)
                    .description(meter.description()).register(registry));
        }
    }

    /**
     * A budget's figures read at most once a second, however many meters a scrape reads, and again once it closed: until
     * its meters are removed or another budget of its name takes them over, they read what it left, and its totals.
     */
    private static final class RecentBudgetStatistics {

        /** How old the figures may be: a second, as the manager's. */
        private static final long MAX_AGE_NANOS = 1_000_000_000L;

        private final MemoryBudget budget;
        private @Nullable BudgetStatistics last;
        /** The requests queued in the budgets under it when {@link #last} was read: each waits in its own budget's queue. */
        private long waitingUnder;
        private long readAt;
        /** Whether the budget had closed when {@link #last} was read. */
        private boolean readClosed;

        RecentBudgetStatistics(MemoryBudget budget) {
            this.budget = budget;
        }

        synchronized double read(ToDoubleFunction<BudgetStatistics> figure) {
            long now = System.nanoTime();
            boolean closed = budget.isClosed();
            if (last == null || now - readAt > MAX_AGE_NANOS || closed && !readClosed) {
                last = budget.statistics();
                waitingUnder = waitingUnder(budget);
                readAt = now;
                readClosed = closed;
            }
            return figure.applyAsDouble(last);
        }

        /** Its requests waiting and those of the budgets under it (requests', tasks'), as its other figures count theirs. */
        synchronized double waitingInAll() {
            return read(BudgetStatistics::waitingRequests) + waitingUnder;
        }

        private static long waitingUnder(MemoryBudget budget) {
            long waiting = 0;
            for (MemoryBudget child : budget.children()) {
                waiting += child.statistics().waitingRequests() + waitingUnder(child);
            }
            return waiting;
        }
    }

    /** A tag value: lower case, words joined by dashes ({@code host}, {@code pool-limit}). */
    static String tagValue(Enum<?> value) {
        return value.name().toLowerCase(Locale.ROOT).replace('_', '-');
    }

    private static Gauge mappedGauge(MeterRegistry registry, ComputeMeters meter, ObservedManager observed, Tags tags,
            ToDoubleFunction<MappedFileStatistics> figure) {
        RecentMemoryStatistics statistics = observed.statistics();
        return Gauge.builder(meter.getName(), observed.manager(), m -> figure.applyAsDouble(statistics.mappedFiles()))
                .baseUnit(meter.getBaseUnit()).tags(tags).description(meter.description()).register(registry);
    }

    private static Gauge deviceGauge(MeterRegistry registry, ComputeMeters meter, ObservedManager observed, Tags tags,
            ToDoubleFunction<DeviceMemoryInfo> figure) {
        RecentMemoryStatistics statistics = observed.statistics();
        // -1 where the backend cannot tell: no value rather than a negative size
        return Gauge.builder(meter.getName(), observed.manager(), m -> {
            if (m.isClosed()) {
                return Double.NaN;
            }
            double value;
            try {
                value = figure.applyAsDouble(statistics.deviceMemory());
            } catch (RuntimeException driverFailed) {
                // no value either: health reports the failure; thrown, it would fail the registry's whole scrape
                return Double.NaN;
            }
            return value < 0 ? Double.NaN : value;
        }).baseUnit(meter.getBaseUnit()).tags(tags).description(meter.description()).register(registry);
    }

    /** Registers the meters of one location that read the manager's recent figures, adding each to {@code meters}. */
    private static final class Figures {

        private final MeterRegistry registry;
        private final ObservedManager observed;
        private final MemoryLocation location;
        private final Tags tags;
        private final List<Meter> meters;

        Figures(MeterRegistry registry, ObservedManager observed, MemoryLocation location, Tags tags, List<Meter> meters) {
            this.registry = registry;
            this.observed = observed;
            this.location = location;
            this.tags = tags;
            this.meters = meters;
        }

        void gauge(ComputeMeters meter, ToDoubleFunction<MemoryStatistics> figure) {
            meters.add(Gauge.builder(meter.getName(), observed.manager(), m -> read(m, figure))
                    .baseUnit(meter.getBaseUnit()).tags(tags).description(meter.description()).register(registry));
        }

        void counter(ComputeMeters meter, ToDoubleFunction<MemoryStatistics> figure) {
            meters.add(FunctionCounter.builder(meter.getName(), observed.manager(), m -> read(m, figure))
                    .baseUnit(meter.getBaseUnit()).tags(tags).description(meter.description()).register(registry));
        }

        void copied(String direction, ToDoubleFunction<MemoryStatistics> figure) {
            meters.add(FunctionCounter.builder(ComputeMeters.COPIED.getName(), observed.manager(), m -> read(m, figure))
                    .baseUnit(ComputeMeters.COPIED.getBaseUnit()).tags(tags).tag(ComputeMeters.Tag.DIRECTION.asString(), direction)
                    .description(ComputeMeters.COPIED.description()).register(registry));
        }

        private double read(UnifiedMemoryManager manager, ToDoubleFunction<MemoryStatistics> figure) {
            return figure.applyAsDouble(observed.statistics().statistics(location));
        }
    }
}
