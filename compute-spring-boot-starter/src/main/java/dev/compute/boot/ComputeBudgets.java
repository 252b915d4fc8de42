package dev.compute.boot;

import dev.compute.memory.BudgetReservationException;
import dev.compute.memory.BudgetSpec;
import dev.compute.memory.InvalidSettingException;
import dev.compute.memory.ManagerSettings;
import dev.compute.memory.MemoryBudget;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedMemoryManager;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;

/**
 * The budgets configured under {@code compute.budgets} (or {@code compute.managers.<manager>.budgets}), made with
 * their managers: the tenants. Inject it to allocate through one ({@code budgets.budget("tenant-a")}); the request and
 * task scopes make each request's and task's own budget under one; the endpoint, health and meters show them. Only these
 * budgets are metered, so the meters' tags stay a bounded set, whatever budgets the application makes at run time.
 */
public final class ComputeBudgets {

    /**
     * A configured budget.
     *
     * @param manager the name of its manager, as the observers name it ({@code default} for the one manager of {@code compute.*})
     * @param requestLimitBytes the limit of each request's or task's own budget under it
     */
    public record Configured(String manager, MemoryBudget budget, long requestLimitBytes) {
        public String name() {
            return budget.name();
        }
    }

    private final List<Configured> all = new CopyOnWriteArrayList<>();
    private final List<Consumer<Configured>> listeners = new CopyOnWriteArrayList<>();
    private final List<Consumer<Configured>> removalListeners = new CopyOnWriteArrayList<>();
    private volatile @Nullable String primary;
    /** The starter's managers by the names the observers give them, so that a budget added for one is checked to be its. */
    private final Map<String, UnifiedMemoryManager> managers = new ConcurrentHashMap<>();

    /**
     * Calls {@code listener} with each budget observed from now on: one {@link #add added} at run time, or made with a
     * manager. The meters use it, so that a budget added after they were bound is metered too. The handle stops it.
     */
    public AutoCloseable onAdded(Consumer<Configured> listener) {
        listeners.add(listener);
        return () -> listeners.remove(listener);
    }

    /**
     * Calls {@code listener} with each budget no longer metered: one that closed (or whose manager closed), and a closed
     * one whose name a budget {@link #add added} later takes. The meters use it to remove the closed budget's meters after
     * a grace, so that tenants that come and go leave none behind, unless a new budget of the name took them over. The
     * handle stops it.
     */
    public AutoCloseable onRemoved(Consumer<Configured> listener) {
        removalListeners.add(listener);
        return () -> removalListeners.remove(listener);
    }

    private void added(Configured configured) {
        for (Consumer<Configured> listener : listeners) {
            listener.accept(configured);
        }
        configured.budget().whenClosed(() -> closed(configured));
    }

    /**
     * {@code configured}'s budget closed: the meters are told, unless a budget of its name replaced it already. It stays
     * known by its name until then, so that work naming it runs in it and is refused, rather than run with no budget.
     */
    private void closed(Configured configured) {
        // under the lock that add takes, so that this telling never comes after a budget of its name was added (a listener
        // going by the name would drop the new one's); the add that replaces it tells of it too, for a close told late
        synchronized (all) {
            if (all.stream().anyMatch(each -> each == configured)) {
                for (Consumer<Configured> listener : removalListeners) {
                    listener.accept(configured);
                }
            }
        }
    }

    /** Every configured budget, in the order of the managers and then of the configuration. */
    public List<Configured> all() {
        return List.copyOf(all);
    }

    /**
     * The configured budget {@code name} of the primary manager (the only one, {@code compute.primary}, or the first
     * named one by default); where the primary manager is none of the starter's (the application's own {@code @Primary}
     * one, which has no configured budgets) or there is none, the one budget of that name, if only one manager has one:
     * never one of several, which {@link #budget(String, String)} tells apart.
     */
    public Optional<MemoryBudget> budget(String name) {
        String manager = primary;
        if (manager != null) {
            return budget(manager, name);
        }
        List<Configured> named = all.stream().filter(each -> each.name().equals(name)).toList();
        return named.size() == 1 ? Optional.of(named.getFirst().budget()) : Optional.empty();
    }

    /** The configured budget {@code name} of the manager {@code manager}. */
    public Optional<MemoryBudget> budget(String manager, String name) {
        return find(manager, name).map(Configured::budget);
    }

    /** The configured budget {@code name} of the manager {@code manager}, with its request limit. */
    public Optional<Configured> find(String manager, String name) {
        return all.stream().filter(each -> each.manager().equals(manager) && each.name().equals(name)).findFirst();
    }

    /** The configured budget that {@code budget} is, or is under (a request's or a task's own); empty for any other. */
    public Optional<Configured> configuredFor(MemoryBudget budget) {
        MemoryBudget top = budget;
        while (top.parent().isPresent()) {
            top = top.parent().get();
        }
        MemoryBudget root = top;
        return all.stream().filter(each -> each.budget() == root).findFirst();
    }

    /** Whether {@code budget} is one of the configured budgets itself. */
    public boolean isConfigured(MemoryBudget budget) {
        return all.stream().anyMatch(each -> each.budget() == budget);
    }

    /**
     * Observes a budget the application made itself on a manager the observers name {@code manager} as a configured one:
     * metered under its name, in health, and a parent for the budgets of requests and tasks. Keep such budgets few and
     * long-lived (tenants), as configured ones are: each adds meters.
     *
     * Once it closes, its meters read what it left for a minute, then go. A closed budget of the same name on that manager
     * (a tenant that left and came back) is no longer observed: the new one takes its name, its place and, within that
     * minute, its meters, which read the new budget (its counters from its own totals: a counter reset).
     *
     * @throws IllegalArgumentException for a budget another manager made than the starter's manager of that name, or one
     *     of the starter's managers made under a name none of them has; for a budget made under another (a request's): only the top ones are observed; for
     *     a name that an open budget observed on that manager has already; for a request limit that is not positive or
     *     is above the budget's limit
     */
    public Configured add(String manager, MemoryBudget budget, long requestLimitBytes) {
        if (budget.parent().isPresent()) {
            throw new IllegalArgumentException("memory budget '" + budget.path() + "' is under another: only budgets a manager made are observed");
        }
        UnifiedMemoryManager owner = managers.get(manager);
        if (owner != null && !budget.isClosed() && !owner.budgets().contains(budget)) { // the manager lists its open budgets
            // observed under the wrong manager, its meters, health and requests (gpu/search) would be that manager's
            throw new IllegalArgumentException("memory budget '" + budget.name() + "' is not a budget of manager '" + manager
                    + "': add it for the manager that made it");
        }
        if (owner == null && !budget.isClosed()) {
            // a name none of the starter's managers has (a typo) for a budget one of them made: no meters, health or
            // request (gpu/search) would find it under that name
            for (Map.Entry<String, UnifiedMemoryManager> made : managers.entrySet()) {
                if (made.getValue().budgets().contains(budget)) {
                    throw new IllegalArgumentException("memory budget '" + budget.name() + "' is not a budget of manager '" + manager
                            + "' but of '" + made.getKey() + "': add it for the manager that made it");
                }
            }
        }
        if (requestLimitBytes <= 0 || requestLimitBytes > budget.limitBytes()) { // as compute.budgets.<name>.request-limit is checked
            throw new IllegalArgumentException("the request limit of memory budget '" + budget.name() + "' must be positive and at most its limit of "
                    + budget.limitBytes() + " bytes: " + requestLimitBytes + " bytes");
        }
        Configured configured = new Configured(manager, budget, requestLimitBytes);
        List<Configured> replaced = new ArrayList<>();
        synchronized (all) {
            for (Configured each : all) {
                if (each.manager().equals(manager) && each.name().equals(budget.name())) {
                    if (!each.budget().isClosed()) {
                        throw new IllegalArgumentException("memory budget '" + budget.name() + "' of manager '" + manager + "' is observed already"
                                + (each.budget() == budget ? "" : " (another budget of that name, still open)"));
                    }
                    replaced.add(each);
                }
            }
            all.removeAll(replaced);
            all.add(configured);
        }
        for (Configured gone : replaced) {
            for (Consumer<Configured> listener : removalListeners) {
                listener.accept(gone);
            }
        }
        added(configured);
        return configured;
    }

    /**
     * Makes the budgets {@code properties} describe (set under {@code prefix}) on {@code manager}, named {@code name}
     * by the observers; {@code primary}: whether it is the manager injected where one is asked for. A reservation that
     * does not fit fails with an {@link InvalidSettingException} naming it; the budgets made before it are closed again.
     */
    void make(String name, boolean primary, UnifiedMemoryManager manager, Map<String, BudgetProperties> properties, String prefix) {
        managers.put(name, manager);
        List<Configured> made = new ArrayList<>();
        try {
            for (Map.Entry<String, BudgetProperties> entry : properties.entrySet()) {
                BudgetSpec spec = entry.getValue().toSpec(entry.getKey(), prefix);
                made.add(new Configured(name, open(manager, spec, prefix), entry.getValue().requestLimitBytes()));
            }
        } catch (RuntimeException e) {
            made.forEach(each -> each.budget().close());
            throw e;
        }
        all.addAll(made);
        if (primary) {
            this.primary = name;
        }
        made.forEach(this::added);
    }

    private static MemoryBudget open(UnifiedMemoryManager manager, BudgetSpec spec, String prefix) {
        String at = prefix + "." + spec.name();
        String locations = String.join(", ", manager.locations().stream().map(ComputeBudgets::key).toList());
        // a limit there would limit nothing, as a reservation there would keep nothing: either is a setting no one meant
        for (MemoryLocation location : spec.locationLimits().keySet()) {
            if (!manager.locations().contains(location)) {
                throw new InvalidSettingException(at + ".location-limits." + key(location), spec.limitBytes(location) + " bytes",
                        "a location limit at a location this manager has: " + locations);
            }
        }
        for (MemoryLocation location : spec.reservations().keySet()) {
            if (!manager.locations().contains(location)) {
                throw new InvalidSettingException(at + ".reservations." + key(location), spec.reservedBytes(location) + " bytes",
                        "a reservation at a location this manager has: " + locations);
            }
        }
        try {
            return manager.budget(spec);
        } catch (BudgetReservationException e) {
            InvalidSettingException invalid = new InvalidSettingException(at + ".reservations." + key(e.location()), e.reservedBytes() + " bytes",
                    "a reservation that fits, with the other budgets' reservations, under " + ManagerSettings.capPropertyOf(e.location())
                            + " (" + manager.settings().capOf(e.location()) + " bytes): " + e.getMessage());
            invalid.initCause(e);
            throw invalid;
        }
    }

    private static String key(MemoryLocation location) {
        return location.name().toLowerCase(Locale.ROOT);
    }
}
