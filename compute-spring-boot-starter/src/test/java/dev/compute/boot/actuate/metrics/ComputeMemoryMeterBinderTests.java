package dev.compute.boot.actuate.metrics;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.compute.boot.ComputeBudgets;
import dev.compute.boot.MemoryEventRelays;
import dev.compute.boot.actuate.ObservedManagers;
import dev.compute.memory.BudgetSpec;
import dev.compute.memory.DataType;
import dev.compute.memory.MemoryBudget;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemoryStatistics;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.lang.ref.WeakReference;
import java.lang.reflect.Proxy;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

class ComputeMemoryMeterBinderTests {

    private final UnifiedMemoryManager manager = UnifiedMemoryManager.builder()
            .backend(new SimulatedDiscreteBackend(64L << 20)).build();
    private final PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);

    @AfterEach
    void close() {
        manager.close();
        registry.close();
    }

    /** The sweep of closed budgets' meters waiting for its grace to end, which {@link #endTheGrace} ends. */
    private final List<Runnable> afterGrace = new ArrayList<>();

    private ComputeMemoryMeterBinder binderOf(ComputeBudgets budgets) {
        return new ComputeMemoryMeterBinder(new ObservedManagers(Map.of("unifiedMemoryManager", manager), manager), new MemoryEventRelays(), budgets,
                afterGrace::add);
    }

    /** Ends the grace of every budget closed so far: a sweep starts the next for those closed while it waited. */
    private void endTheGrace() {
        while (!afterGrace.isEmpty()) {
            List<Runnable> sweeps = List.copyOf(afterGrace);
            afterGrace.clear();
            sweeps.forEach(Runnable::run);
        }
    }

    private static ComputeMemoryMeterBinder binderOf(UnifiedMemoryManager manager) {
        return new ComputeMemoryMeterBinder(new ObservedManagers(Map.of("unifiedMemoryManager", manager), manager), new MemoryEventRelays());
    }

    @Test
    void eachConfiguredBudgetHasMetersUnderItsNameAndTheBudgetsUnderItNone() {
        ComputeBudgets budgets = new ComputeBudgets();
        MemoryBudget tenant = manager.budget(BudgetSpec.of("tenant-a", 8L << 20).withReservation(MemoryLocation.DEVICE, 1L << 20));
        budgets.add("default", tenant, 1L << 20);
        binderOf(budgets).bindTo(registry);
        try (MemoryBudget request = tenant.child("request-1", 1L << 20); UnifiedBuffer held = request.allocate(4096, MemoryLocation.DEVICE)) {
            assertThat(registry.get("compute.memory.budget.allocated").tags("budget", "tenant-a", "name", "default", "backend", "simulated",
                    "device", "0").gauge().value()).isEqualTo(4096);
            assertThat(registry.get("compute.memory.budget.limit").tag("budget", "tenant-a").gauge().value()).isEqualTo(8L << 20);
            assertThat(registry.get("compute.memory.budget.reserved").tag("budget", "tenant-a").gauge().value()).isEqualTo(1L << 20);
            assertThat(registry.get("compute.memory.budget.live.buffers").tag("budget", "tenant-a").gauge().value()).isEqualTo(1);
            assertThat(registry.get("compute.memory.budget.allocations").tag("budget", "tenant-a").functionCounter().count()).isEqualTo(1);
            assertThat(registry.find("compute.memory.budget.allocated").gauges()).as("the request's budget is not metered").hasSize(1);
            assertThat(registry.scrape()).contains("compute_memory_budget_allocated_bytes{backend=\"simulated\",budget=\"tenant-a\"")
                    .doesNotContain("request-1");
        }
        tenant.close();
        endTheGrace();
        assertThat(registry.find("compute.memory.budget.allocated").tag("budget", "tenant-a").gauges()).as("closed: its meters are gone").isEmpty();
    }

    @Test
    void tenantsThatComeAndGoUnderNewNamesLeaveNoMetersBehind() {
        ComputeBudgets budgets = new ComputeBudgets();
        binderOf(budgets).bindTo(registry);
        int metersBefore = registry.getMeters().size();
        for (int i = 0; i < 5; i++) {
            try (MemoryBudget tenant = manager.budget("tenant-" + i, 8L << 20)) {
                budgets.add("default", tenant, 1L << 20);
                assertThat(registry.find("compute.memory.budget.limit").tag("budget", "tenant-" + i).gauges()).hasSize(1);
            }
        }
        endTheGrace();

        assertThat(registry.getMeters()).as("no meter of a closed budget, reading NaN").hasSize(metersBefore);
        assertThat(registry.scrape()).doesNotContain("budget=");
    }

    /**
     * Budgets added and closed fast left a removal task per close waiting out the grace, each holding the closed
     * budget: 19,999 after 10,000 closes of one name (the add that takes a closed budget's name tells of it again), and
     * one more per distinct name. One sweep waits now, whatever the churn, and the meters still go after it.
     */
    @Test
    void budgetsThatComeAndGoFastLeaveOneSweepWaitingNotATaskPerClose() {
        ComputeBudgets budgets = new ComputeBudgets();
        binderOf(budgets).bindTo(registry);
        int metersBefore = registry.getMeters().size();
        for (int i = 0; i < 10_000; i++) {
            try (MemoryBudget tenant = manager.budget("tenant", 8L << 20)) {
                budgets.add("default", tenant, 1L << 20);
            }
        }
        assertThat(afterGrace).as("waiting after 10,000 closes of one name").hasSize(1);
        for (int i = 0; i < 2_000; i++) {
            try (MemoryBudget tenant = manager.budget("tenant-" + i, 8L << 20)) {
                budgets.add("default", tenant, 1L << 20);
            }
        }
        assertThat(afterGrace).as("waiting after 2,000 more of distinct names").hasSize(1);
        endTheGrace();
        assertThat(registry.getMeters()).as("every closed budget's meters gone").hasSize(metersBefore);
    }

    /**
     * A closed budget's meters stay for the grace (a budget of its name coming back meanwhile takes them over, see
     * {@link #scrapesWhileATenantLeavesAndComesBackUnderItsNameAllSucceed}), reading what it holds, 0, and its totals,
     * not NaN, which would make the sum over the tenants NaN; then they go.
     */
    @Test
    void aClosedBudgetsMetersReadWhatItLeftForTheGraceAndThenGo() {
        ComputeBudgets budgets = new ComputeBudgets();
        binderOf(budgets).bindTo(registry);
        int metersBefore = registry.getMeters().size();
        MemoryBudget tenant = manager.budget("tenant-c", 8L << 20);
        budgets.add("default", tenant, 1L << 20);
        tenant.allocate(4096, MemoryLocation.DEVICE); // left open: the close closes it
        assertThat(registry.get("compute.memory.budget.allocated").tag("budget", "tenant-c").gauge().value()).isEqualTo(4096);

        tenant.close();

        assertThat(registry.get("compute.memory.budget.allocated").tag("budget", "tenant-c").gauge().value()).as("holds nothing").isZero();
        assertThat(registry.get("compute.memory.budget.allocations").tag("budget", "tenant-c").functionCounter().count()).isEqualTo(1);
        assertThat(afterGrace).as("the removal waits for the grace").hasSize(1);
        endTheGrace();
        assertThat(registry.find("compute.memory.budget.allocated").tag("budget", "tenant-c").gauges()).isEmpty();
        assertThat(registry.getMeters()).as("every meter of the budget").hasSize(metersBefore);
    }

    /**
     * With a budget per request, every allocateAsync waits in a request's budget: the tenant's waiting meter counts those
     * too, as its other meters count what the budgets under it hold, or it would read 0 while its requests queue.
     */
    @Test
    void aConfiguredBudgetsWaitingRequestsCountThoseQueuedInTheBudgetsUnderIt() throws Exception {
        ComputeBudgets budgets = new ComputeBudgets();
        MemoryBudget tenant = manager.budget("tenant-w", 1L << 20);
        budgets.add("default", tenant, 1L << 20);
        new ComputeMemoryMeterBinder(new ObservedManagers(Map.of("unifiedMemoryManager", manager), manager), new MemoryEventRelays(), budgets)
                .bindTo(registry);
        try (MemoryBudget first = tenant.child("request-1", 1L << 20); MemoryBudget second = tenant.child("request-2", 1L << 20)) {
            UnifiedBuffer held = first.allocate(1L << 20, MemoryLocation.DEVICE);
            CompletableFuture<UnifiedBuffer> waiting = second.allocateAsync(1L << 20, MemoryLocation.DEVICE, Duration.ofMinutes(1));
            await().atMost(Duration.ofSeconds(10)).until(() -> second.statistics().waitingRequests() == 1);

            assertThat(registry.get("compute.memory.budget.waiting").tag("budget", "tenant-w").gauge().value())
                    .as("request-2 waits for the room tenant-w's limit leaves").isEqualTo(1);

            held.close();
            waiting.get(10, TimeUnit.SECONDS).close();
        }
    }

    @Test
    void aConfiguredBudgetsMetersStillReadItAfterAGarbageCollection() {
        ComputeBudgets budgets = new ComputeBudgets();
        MemoryBudget tenant = manager.budget("tenant-c", 8L << 20);
        budgets.add("default", tenant, 1L << 20);
        new ComputeMemoryMeterBinder(new ObservedManagers(Map.of("unifiedMemoryManager", manager), manager), new MemoryEventRelays(), budgets)
                .bindTo(registry);
        collectGarbage();
        try (UnifiedBuffer held = tenant.allocate(4096, MemoryLocation.DEVICE)) {
            assertThat(registry.get("compute.memory.budget.allocated").tag("budget", "tenant-c").gauge().value()).isEqualTo(4096);
            assertThat(registry.get("compute.memory.budget.allocations").tag("budget", "tenant-c").functionCounter().count()).isEqualTo(1);
            assertThat(registry.scrape()).contains("compute_memory_budget_live_buffers{backend=\"simulated\",budget=\"tenant-c\",device=\"0\",name=\"default\"} 1.0");
        }
    }

    /** Returns once a collection has cleared what only weak references reach (a meter holds what it reads weakly). */
    private static void collectGarbage() {
        WeakReference<Object> canary = new WeakReference<>(new Object());
        await().atMost(Duration.ofSeconds(10)).until(() -> {
            System.gc();
            return canary.get() == null;
        });
    }

    @Test
    void aTenantThatLeftAndCameBackIsMeteredAsTheNewBudget() {
        ComputeBudgets budgets = new ComputeBudgets();
        binderOf(budgets).bindTo(registry);
        MemoryBudget first = manager.budget("tenant-b", 8L << 20);
        budgets.add("default", first, 1L << 20);
        first.allocate(4096, MemoryLocation.DEVICE).close();
        Gauge limit = registry.get("compute.memory.budget.limit").tag("budget", "tenant-b").gauge();
        assertThatThrownBy(() -> budgets.add("default", manager.budget("tenant-b", 1L << 20), 1L << 20))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("'tenant-b'").hasMessageContaining("observed already");
        first.close();

        MemoryBudget again = manager.budget("tenant-b", 4L << 20);
        budgets.add("default", again, 1L << 20);
        endTheGrace(); // of the first: the meters are the new budget's now
        try (UnifiedBuffer held = again.allocate(2048, MemoryLocation.DEVICE)) {
            assertThat(registry.get("compute.memory.budget.limit").tag("budget", "tenant-b").gauge()).as("the same meters, taken over")
                    .isSameAs(limit);
            assertThat(limit.value()).isEqualTo(4L << 20);
            assertThat(registry.get("compute.memory.budget.allocated").tag("budget", "tenant-b").gauge().value()).isEqualTo(2048);
            assertThat(registry.get("compute.memory.budget.allocations").tag("budget", "tenant-b").functionCounter().count())
                    .as("the new budget's total: a counter reset").isEqualTo(1);
            assertThat(registry.find("compute.memory.budget.allocated").tag("budget", "tenant-b").gauges()).hasSize(1);
        }
        assertThat(budgets.budget("default", "tenant-b")).containsSame(again);
        assertThat(budgets.all()).extracting(ComputeBudgets.Configured::budget).containsExactly(again);
        again.close();
        endTheGrace();
        assertThat(registry.find("compute.memory.budget.limit").tag("budget", "tenant-b").gauges()).as("gone after the grace of its last close")
                .isEmpty();
    }

    /**
     * A tenant that leaves and comes back under its name while a scrape runs: its meters were removed and registered
     * again under the same name and tags, and the Prometheus scrape, iterating a meter's children as they changed, saw
     * the old and the new one (micrometer-metrics/micrometer#6851) and failed with DuplicateLabelsException: /actuator/prometheus
     * answered 500 for 27 of 653 scrapes in 3 s. The meters of a name stay registered and read the name's current budget.
     */
    @Test
    void scrapesWhileATenantLeavesAndComesBackUnderItsNameAllSucceed() throws Exception {
        ComputeBudgets budgets = new ComputeBudgets();
        // the removals after the grace are not this test's: none is left behind to run into later tests
        new ComputeMemoryMeterBinder(new ObservedManagers(Map.of("unifiedMemoryManager", manager), manager), new MemoryEventRelays(), budgets,
                removal -> {}).bindTo(registry);
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(3);
        CompletableFuture<Integer> comings = CompletableFuture.supplyAsync(() -> {
            int times = 0;
            while (System.nanoTime() < until) {
                try (MemoryBudget tenant = manager.budget("tenant", 8L << 20)) {
                    budgets.add("default", tenant, 1L << 20);
                }
                times++;
            }
            return times;
        });
        int scrapes = 0;
        List<Throwable> failures = new ArrayList<>();
        while (System.nanoTime() < until) {
            try {
                registry.scrape();
            } catch (RuntimeException failed) {
                failures.add(failed);
            }
            scrapes++;
        }

        assertThat(comings.get(10, TimeUnit.SECONDS)).as("the tenant came and went").isPositive();
        assertThat(failures).as("failed scrapes of " + scrapes).isEmpty();
    }

    @Test
    void metersReadTheManagersStatisticsPerLocation() {
        binderOf(manager).bindTo(registry);
        try (UnifiedBuffer buffer = manager.allocate(DataType.FLOAT64, 4096, MemoryLocation.DEVICE)) {
            buffer.copyFrom(new double[4096]);
            buffer.copyTo(new double[4096]);
            MemoryStatistics device = manager.statistics(MemoryLocation.DEVICE);
            assertThat(registry.get("compute.memory.reserved").tags("location", "device", "name", "default", "backend", "simulated", "device", "0")
                    .gauge().value()).isEqualTo(device.reservedBytes());
            assertThat(registry.get("compute.memory.allocated").tag("location", "device").gauge().value()).isEqualTo(device.allocatedBytes());
            assertThat(registry.get("compute.memory.live.buffers").tag("location", "device").gauge().value()).isEqualTo(1);
            assertThat(registry.get("compute.memory.backend.allocations").tag("location", "device").functionCounter().count())
                    .isEqualTo(device.backendAllocations());
            assertThat(registry.get("compute.memory.copied").tags("location", "device", "direction", "host-to-device")
                    .functionCounter().count()).isEqualTo(4096 * 8);
            assertThat(registry.get("compute.memory.copied").tags("location", "device", "direction", "device-to-host")
                    .functionCounter().count()).isEqualTo(4096 * 8);
            assertThat(registry.get("compute.memory.cap").tag("location", "device").gauge().value())
                    .isEqualTo(manager.settings().capOf(MemoryLocation.DEVICE));
            assertThat(registry.get("compute.device.memory.total").tag("name", "default").gauge().value()).isEqualTo(64L << 20);
            assertThat(registry.get("compute.device.memory.free").tag("name", "default").gauge().value()).isPositive().isLessThan(64L << 20);
        }
        assertThat(registry.find("compute.memory.reserved").gauges()).hasSize(manager.locations().size());
        assertThat(registry.get("compute.memory.leaks").tags("backend", "simulated", "device", "0").functionCounter())
                .as("one leak count for the manager, without a location tag")
                .satisfies(leaks -> assertThat(leaks.getId().getTag("location")).isNull())
                .satisfies(leaks -> assertThat(leaks.count()).isEqualTo(manager.leaksDetected()).isZero());
    }

    /**
     * allocateAsync requests queued for memory at a location now, those that ever queued and those that gave up, as the
     * manager counts them: figures of its statistics that no meter (nor the endpoint) showed.
     */
    @Test
    void requestsWaitingForMemoryAreMeteredAtTheirLocationWithThoseThatQueuedAndTimedOut() {
        binderOf(manager).bindTo(registry);
        try (UnifiedBuffer most = manager.allocate(48L << 20, MemoryLocation.DEVICE)) {
            CompletableFuture<UnifiedBuffer> timedOut = manager.allocateAsync(32L << 20, MemoryLocation.DEVICE, Duration.ofMillis(50));
            assertThat(timedOut).failsWithin(Duration.ofSeconds(10));
            CompletableFuture<UnifiedBuffer> waiting = manager.allocateAsync(32L << 20, MemoryLocation.DEVICE, Duration.ofMinutes(1));
            try {
                MemoryStatistics device = manager.statistics(MemoryLocation.DEVICE);
                assertThat(device.waitingRequests()).isEqualTo(1);
                assertThat(device.waits()).isEqualTo(2);
                assertThat(device.waitTimeouts()).isEqualTo(1);
                assertThat(registry.get("compute.memory.waiting").tag("location", "device").gauge().value()).isEqualTo(device.waitingRequests());
                assertThat(registry.get("compute.memory.waits").tag("location", "device").functionCounter().count()).isEqualTo(device.waits());
                assertThat(registry.get("compute.memory.wait.timeouts").tag("location", "device").functionCounter().count())
                        .isEqualTo(device.waitTimeouts());
                assertThat(registry.get("compute.memory.waiting").tag("location", "host").gauge().value()).isZero();
                assertThat(registry.scrape()).contains("compute_memory_waiting_requests{").contains("compute_memory_waits_total{")
                        .contains("compute_memory_wait_timeouts_total{");
            } finally {
                waiting.cancel(true);
            }
        }
    }

    @Test
    void prometheusNamesCarryTheirUnitsAndTagValuesAreLowerCase() {
        binderOf(manager).bindTo(registry);
        manager.allocate(1 << 20, MemoryLocation.DEVICE).close();

        String scrape = registry.scrape();

        assertThat(scrape).contains("compute_memory_reserved_bytes{backend=\"simulated\",device=\"0\",location=\"device\",name=\"default\"}")
                .contains("compute_memory_reserved_peak_bytes{").contains("compute_memory_allocated_bytes{")
                .contains("compute_memory_cached_bytes{").contains("compute_memory_fragmentation_ratio{")
                .contains("compute_memory_overhead_ratio{").contains("compute_memory_pool_hits_total{")
                .contains("compute_memory_pool_misses_total{").contains("compute_memory_backend_allocations_total{")
                .contains("compute_memory_oom_retries_total{").contains("compute_memory_trims_total{")
                .contains("compute_memory_cap_bytes{backend=\"simulated\",device=\"0\",location=\"device\",name=\"default\"} 4.294967296E9")
                .contains("compute_device_memory_total_bytes{backend=\"simulated\",device=\"0\",name=\"default\"} 6.7108864E7")
                .contains("compute_device_memory_free_bytes{backend=\"simulated\",device=\"0\",name=\"default\"}")
                .contains("compute_memory_copied_bytes_total{backend=\"simulated\",device=\"0\",direction=\"host-to-device\",location=\"device\",name=\"default\"}")
                .contains("compute_memory_leaks_total{backend=\"simulated\",device=\"0\",name=\"default\"} 0.0")
                .doesNotContain("location=\"DEVICE\"");
    }

    @Test
    void eachManagerIsTaggedWithItsName() {
        try (UnifiedMemoryManager other = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend(32L << 20))
                .pinningEnabled(false).maxPoolSize(16L << 20).build()) {
            Map<String, UnifiedMemoryManager> beans = new LinkedHashMap<>();
            beans.put("gpuUnifiedMemoryManager", manager);
            beans.put("tenantA", other);
            new ComputeMemoryMeterBinder(new ObservedManagers(beans, manager), new MemoryEventRelays()).bindTo(registry);
            assertThat(registry.get("compute.memory.cap").tags("name", "gpu", "location", "host").gauge().value()).isEqualTo(4L << 30);
            assertThat(registry.get("compute.memory.cap").tags("name", "tenantA", "location", "host").gauge().value()).isEqualTo(16L << 20);
            assertThat(registry.get("compute.device.memory.total").tag("name", "tenantA").gauge().value()).isEqualTo(32L << 20);
            assertThat(registry.find("compute.memory.reserved").tag("name", "tenantA").gauges()).hasSize(other.locations().size());
        }
    }

    @Test
    void aScrapeOfEveryMeterCollectsTheFiguresOnce() {
        LongAdder collections = new LongAdder();
        LongAdder deviceQueries = new LongAdder();
        UnifiedMemoryManager counted = (UnifiedMemoryManager) Proxy.newProxyInstance(getClass().getClassLoader(),
                new Class<?>[] {UnifiedMemoryManager.class}, (proxy, method, arguments) -> {
                    switch (method.getName()) {
                        case "statistics" -> collections.increment();
                        case "deviceMemory" -> deviceQueries.increment();
                        default -> { }
                    }
                    return method.invoke(manager, arguments);
                });
        binderOf(counted).bindTo(registry);

        String scrape = registry.scrape();

        assertThat(scrape).contains("compute_memory_segments{").contains("compute_memory_trims_total{").contains("compute_device_memory_free_bytes{");
        assertThat(collections.sum()).as("some 25 meters for each of %d locations, one collection", manager.locations().size()).isEqualTo(1);
        assertThat(deviceQueries.sum()).as("the device's memory is asked once").isEqualTo(1);
    }

    /**
     * A closed manager's meters read what its close left (nothing, once it freed everything), its totals, and a cap of 0:
     * they read NaN, which made every sum over the managers NaN ({@code GET /actuator/metrics/compute.memory.reserved}
     * answered NaN for all of them once one had closed; so does Prometheus's {@code sum}), and a counter reading NaN
     * has no rate.
     */
    @Test
    void aClosedManagersMetersReadWhatItsCloseLeftSoSumsOverTheManagersStayNumbers() {
        try (UnifiedMemoryManager other = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend(64L << 20)).build();
             UnifiedBuffer held = manager.allocate(1 << 20, MemoryLocation.DEVICE)) {
            Map<String, UnifiedMemoryManager> beans = new LinkedHashMap<>();
            beans.put("unifiedMemoryManager", manager);
            beans.put("otherUnifiedMemoryManager", other);
            new ComputeMemoryMeterBinder(new ObservedManagers(beans, manager), new MemoryEventRelays()).bindTo(registry);
            other.allocate(4096, MemoryLocation.DEVICE).close();

            other.close();

            assertThat(registry.get("compute.memory.reserved").tags("name", "other", "location", "device").gauge().value()).isZero();
            assertThat(registry.find("compute.memory.reserved").tag("location", "device").gauges().stream().mapToDouble(Gauge::value).sum())
                    .as("the open manager's, with the closed one's 0").isEqualTo(manager.statistics(MemoryLocation.DEVICE).reservedBytes());
            assertThat(registry.get("compute.memory.allocations").tags("name", "other", "location", "device").functionCounter().count())
                    .isEqualTo(1);
            assertThat(registry.get("compute.memory.cap").tags("name", "other", "location", "device").gauge().value()).isZero();
            assertThat(registry.get("compute.memory.leaks").tag("name", "other").functionCounter().count()).isZero();
            assertThat(registry.get("compute.memory.mapped.files").tag("name", "other").gauge().value()).isZero();
        }
    }

    @Test
    void closingTheBinderRemovesEveryMeterItRegistered() throws Exception {
        ComputeMemoryMeterBinder binder = binderOf(manager);
        binder.bindTo(registry);
        assertThat(registry.getMeters()).isNotEmpty();
        binder.close();
        assertThat(registry.getMeters()).isEmpty();
        assertThat(registry.scrape()).doesNotContain("compute_");
    }

    /**
     * Micrometer removes a meter by its name and tags: a closed budget's removal waiting for its grace when the binder
     * closed must not remove the meters of the same name that the next context's binder registered in the registry.
     */
    @Test
    void closingTheBinderRemovesTheBudgetMetersAndTheirPendingRemovalNoneOfTheNextBinders() throws Exception {
        ComputeBudgets budgets = new ComputeBudgets();
        ComputeMemoryMeterBinder binder = binderOf(budgets);
        binder.bindTo(registry);
        MemoryBudget closed = manager.budget("tenant-d", 8L << 20);
        budgets.add("default", closed, 1L << 20);
        closed.close();
        binder.close();
        assertThat(registry.getMeters()).isEmpty();

        ComputeBudgets next = new ComputeBudgets();
        binderOf(next).bindTo(registry);
        try (MemoryBudget tenant = manager.budget("tenant-d", 4L << 20)) {
            next.add("default", tenant, 1L << 20);
            endTheGrace();
            assertThat(registry.get("compute.memory.budget.limit").tag("budget", "tenant-d").gauge().value()).isEqualTo(4L << 20);
        }
    }
}
