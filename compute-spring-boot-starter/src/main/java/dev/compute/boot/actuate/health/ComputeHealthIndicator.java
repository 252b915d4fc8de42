package dev.compute.boot.actuate.health;

import dev.compute.boot.ComputeBudgets;
import dev.compute.boot.ComputeProperties;
import dev.compute.boot.actuate.ObservedManagers.ObservedManager;
import dev.compute.boot.actuate.RecentMemoryStatistics;
import dev.compute.memory.BackendInfo;
import dev.compute.memory.BudgetStatistics;
import dev.compute.memory.DeviceMemoryInfo;
import dev.compute.memory.ManagerSettings;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemoryStatistics;
import dev.compute.memory.UnifiedMemoryManager;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.springframework.boot.health.contributor.AbstractHealthIndicator;
import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.Status;

/**
 * The health of one manager: UP with the backend, the device and each location's memory; DOWN when the manager is
 * closed or the backend fails to answer. A location's pool near its cap, its fragmentation or the device's memory in
 * use above the thresholds ({@code compute.health.*}), or a configured budget ({@code compute.budgets}) holding more
 * of a limit than {@code compute.health.budget-warning-threshold}, adds a warning to the details and sets
 * {@code compute.health.status-on-warning}: UP by default, since each is a reason to look rather than to take the
 * instance out of a load balancer; a status of the operator's choice otherwise. The memory figures are the shared
 * collection at most a second old ({@link RecentMemoryStatistics}); the device's free memory is asked each time, so
 * that a backend in trouble shows.
 */
public class ComputeHealthIndicator extends AbstractHealthIndicator {

    private final UnifiedMemoryManager manager;
    private final RecentMemoryStatistics statistics;
    private final ComputeProperties.Health thresholds;
    private final String name;
    private final ComputeBudgets budgets;

    public ComputeHealthIndicator(ObservedManager observed, ComputeProperties.Health thresholds) {
        this(observed, thresholds, new ComputeBudgets());
    }

    /** With the budgets the starter configured: those of this manager are in the details, and warn near a limit. */
    public ComputeHealthIndicator(ObservedManager observed, ComputeProperties.Health thresholds, ComputeBudgets budgets) {
        super("Compute memory health check failed");
        this.manager = observed.manager();
        this.statistics = observed.statistics();
        this.thresholds = thresholds;
        this.name = observed.name();
        this.budgets = budgets;
    }

    @Override
    protected void doHealthCheck(Health.Builder builder) {
        if (manager.isClosed()) {
            builder.down().withDetail("reason", "the UnifiedMemoryManager is closed");
            return;
        }
        // Each of these asks the backend; a driver in trouble throws, and AbstractHealthIndicator reports DOWN with the error.
        BackendInfo info = manager.backendInfo();
        DeviceMemoryInfo device = manager.deviceMemory();
        ManagerSettings settings = manager.settings();
        Map<MemoryLocation, MemoryStatistics> figures = statistics.statistics();

        List<String> warnings = new ArrayList<>();
        Map<String, Object> deviceDetails = new LinkedHashMap<>();
        deviceDetails.put("index", info.deviceIndex());
        deviceDetails.put("name", info.deviceName());
        // -1 where the backend cannot tell (OpenCL has no free memory to ask for): left out, with why, not a negative size
        if (device.totalBytes() >= 0) {
            deviceDetails.put("totalBytes", device.totalBytes());
        }
        if (device.freeBytes() >= 0) {
            deviceDetails.put("freeBytes", device.freeBytes());
        }
        if (device.totalBytes() < 0 || device.freeBytes() < 0) {
            deviceDetails.put("memoryUnknown", "the " + info.backend() + " backend does not report the device's "
                    + (device.totalBytes() < 0 ? (device.freeBytes() < 0 ? "total or free" : "total") : "free") + " memory");
        }
        if (device.totalBytes() > 0 && device.freeBytes() >= 0) {
            double used = 1.0 - (double) device.freeBytes() / device.totalBytes();
            deviceDetails.put("usedRatio", used);
            if (used > thresholds.deviceMemoryWarningThreshold()) {
                String[] shares = percents(used, thresholds.deviceMemoryWarningThreshold());
                warnings.add(String.format(Locale.ROOT, "device memory is %s%% used, above compute.health.device-memory-warning-threshold (%s%%)",
                        shares[0], shares[1]));
            }
        }
        Map<MemoryLocation, Map<String, Object>> locations = new LinkedHashMap<>();
        figures.forEach((location, s) -> {
            long cap = settings.capOf(location);
            double capUsed = (double) s.reservedBytes() / cap;
            Map<String, Object> details = new LinkedHashMap<>();
            details.put("allocatedBytes", s.allocatedBytes());
            details.put("reservedBytes", s.reservedBytes());
            details.put("cachedBytes", s.cachedBytes());
            // closed buffers whose memory waits for another thread's view: neither allocated nor cached, yet reserved
            details.put("heldBytes", s.heldBytes());
            details.put("heldBuffers", s.heldBuffers());
            details.put("capBytes", cap);
            details.put("capUsedRatio", capUsed);
            details.put("liveBuffers", s.liveBuffers());
            details.put("fragmentation", s.fragmentation());
            details.put("overhead", s.overhead());
            locations.put(location, details);
            if (capUsed > thresholds.capWarningThreshold()) {
                String[] shares = percents(capUsed, thresholds.capWarningThreshold());
                warnings.add(String.format(Locale.ROOT, "%s pool holds %s%% of its cap (%s, %d bytes), above compute.health.cap-warning-threshold "
                        + "(%s%%): allocations beyond the cap fail", location, shares[0], ManagerSettings.capPropertyOf(location), cap, shares[1]));
            }
            if (s.fragmentation() > thresholds.fragmentationWarningThreshold()) {
                warnings.add(String.format(Locale.ROOT, "%s fragmentation is %.2f, above compute.health.fragmentation-warning-threshold (%.2f): "
                        + "a trim, or fewer mixed-size long-lived buffers, helps", location, s.fragmentation(), thresholds.fragmentationWarningThreshold()));
            }
        });
        Map<String, Map<String, Object>> budgetDetails = budgets(warnings);
        builder.status(warnings.isEmpty() ? Status.UP : new Status(thresholds.statusOnWarning()))
                .withDetail("backend", info.backend()).withDetail("device", deviceDetails).withDetail("locations", locations);
        if (!budgetDetails.isEmpty()) {
            builder.withDetail("budgets", budgetDetails);
        }
        if (!warnings.isEmpty()) {
            builder.withDetail("warnings", warnings);
        }
    }

    /** The configured budgets of this manager, by name; one holding more of a limit than the threshold adds a warning. */
    private Map<String, Map<String, Object>> budgets(List<String> warnings) {
        Map<String, Map<String, Object>> details = new LinkedHashMap<>();
        for (ComputeBudgets.Configured configured : budgets.all()) {
            if (!configured.manager().equals(name) || configured.budget().isClosed()) {
                continue;
            }
            BudgetStatistics figures = configured.budget().statistics();
            double used = figures.usedShare();
            Map<String, Object> detail = new LinkedHashMap<>();
            detail.put("limitBytes", figures.limitBytes());
            detail.put("allocatedBytes", figures.allocatedBytes());
            detail.put("usedShare", used);
            detail.put("reservedBytes", figures.reservedBytes());
            detail.put("liveBuffers", figures.liveBuffers());
            detail.put("refusals", figures.refusals());
            details.put(configured.name(), detail);
            if (used > thresholds.budgetWarningThreshold()) {
                String[] shares = percents(used, thresholds.budgetWarningThreshold());
                warnings.add(String.format(Locale.ROOT, "memory budget '%s' holds %s%% of %s, above "
                        + "compute.health.budget-warning-threshold (%s%%): its requests beyond the limit are refused", configured.name(),
                        shares[0], fullestLimit(figures, used), shares[1]));
            }
        }
        return details;
    }

    /** The limit whose share {@code used} is, with its bytes: the one at all locations, or the location's where that is fuller. */
    private static String fullestLimit(BudgetStatistics figures, double used) {
        for (Map.Entry<MemoryLocation, BudgetStatistics.Location> at : figures.locations().entrySet()) {
            if (figures.usedShare(at.getKey()) == used && (double) figures.allocatedBytes() / figures.limitBytes() < used) {
                return String.format(Locale.ROOT, "its %s limit (%d of %d bytes)", at.getKey(), at.getValue().allocatedBytes(),
                        at.getValue().limitBytes());
            }
        }
        return String.format(Locale.ROOT, "a limit (%d of %d bytes in all)", figures.allocatedBytes(), figures.limitBytes());
    }

    /**
     * A share above its threshold and the threshold, in percent with as few decimals as tell them apart (none where they
     * differ in whole percent): 90.4% used never reads as 90%, above a threshold of 90%, nor a threshold above 0 as 0%.
     */
    static String[] percents(double share, double threshold) {
        for (int decimals = 0; decimals < 6; decimals++) {
            String format = "%." + decimals + "f";
            String shown = String.format(Locale.ROOT, format, share * 100);
            String limit = String.format(Locale.ROOT, format, threshold * 100);
            if (!shown.equals(limit)) {
                for (int more = decimals + 1; threshold > 0 && Double.parseDouble(limit) == 0 && more < 6; more++) {
                    limit = String.format(Locale.ROOT, "%." + more + "f", threshold * 100);
                }
                return new String[] {shown, limit};
            }
        }
        return new String[] {Double.toString(share * 100), Double.toString(threshold * 100)};
    }
}
