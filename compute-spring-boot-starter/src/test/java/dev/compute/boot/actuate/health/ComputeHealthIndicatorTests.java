package dev.compute.boot.actuate.health;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.boot.ComputeBudgets;
import dev.compute.boot.ComputeProperties;
import dev.compute.boot.actuate.ObservedManagers.ObservedManager;
import dev.compute.boot.actuate.RecentMemoryStatistics;
import dev.compute.memory.BudgetSpec;
import dev.compute.memory.DeviceMemoryInfo;
import dev.compute.memory.MemoryBudget;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.ViewScope;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import dev.compute.memory.spi.ComputeBackend;
import java.lang.reflect.Proxy;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.Status;

class ComputeHealthIndicatorTests {

    private final UnifiedMemoryManager manager = UnifiedMemoryManager.builder()
            .backend(new SimulatedDiscreteBackend(64L << 20)).build();

    @AfterEach
    void close() {
        manager.close();
    }

    @Test
    void upWithBackendDeviceAndMemoryDetailsAndNoWarningsBelowTheThresholds() {
        Health health = indicator(new ComputeProperties.Health(0.5, 0.9, 0.9, 1.0, "UP")).health(true);
        assertThat(health.getStatus()).isEqualTo(Status.UP);
        assertThat(health.getDetails()).containsEntry("backend", "simulated").containsKeys("device", "locations")
                .doesNotContainKey("warnings");
        assertThat(castMap(health.getDetails().get("device"))).containsEntry("totalBytes", 64L << 20);
        assertThat(castMap(health.getDetails().get("locations"))).containsKeys(MemoryLocation.DEVICE, MemoryLocation.HOST);
    }

    @Test
    void warnsWhenFragmentationOrDeviceMemoryUsePassesItsThresholdButStaysUp() {
        // Every other block freed: free memory in pieces, so the largest free block is less than all that is cached.
        List<UnifiedBuffer> buffers = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            buffers.add(manager.allocate(64 << 10, MemoryLocation.DEVICE));
        }
        for (int i = 0; i < buffers.size(); i += 2) {
            buffers.get(i).close();
        }
        assertThat(manager.statistics(MemoryLocation.DEVICE).fragmentation()).isPositive();

        Health health = indicator(new ComputeProperties.Health(0.0, 0.0, 1.0, 1.0, "UP")).health(true);

        assertThat(health.getStatus()).isEqualTo(Status.UP);
        assertThat((List<?>) health.getDetails().get("warnings")).anySatisfy(w -> assertThat(w.toString())
                        .startsWith("DEVICE fragmentation").contains("compute.health.fragmentation-warning-threshold"))
                .anySatisfy(w -> assertThat(w.toString()).startsWith("device memory is").contains("compute.health.device-memory-warning-threshold"));
        buffers.forEach(UnifiedBuffer::close);
    }

    /**
     * A closed buffer whose memory waits for a view another thread holds is neither allocated nor cached: the details
     * gave reserved bytes that allocated and cached fell short of, with nothing saying where the rest was.
     */
    @Test
    void memoryHeldForAnotherThreadsViewIsInTheDetailsSoTheFiguresAddUp() throws InterruptedException {
        UnifiedBuffer viewed = manager.allocate(3 << 20, MemoryLocation.HOST);
        CountDownLatch holding = new CountDownLatch(1);
        CountDownLatch done = new CountDownLatch(1);
        Thread viewer = Thread.ofPlatform().start(() -> {
            try (ViewScope scope = ViewScope.open()) {
                viewed.hostView();
                holding.countDown();
                done.await(10, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        try {
            assertThat(holding.await(10, TimeUnit.SECONDS)).isTrue();
            viewed.close();

            Health health = indicator(new ComputeProperties.Health(0.5, 0.9, 0.9, 1.0, "UP")).health(true);

            Map<Object, Object> host = castMap(castMap(health.getDetails().get("locations")).get(MemoryLocation.HOST));
            assertThat(host).containsEntry("heldBytes", 3L << 20).containsEntry("heldBuffers", 1L).containsEntry("allocatedBytes", 0L);
            assertThat((long) host.get("allocatedBytes") + (long) host.get("cachedBytes") + (long) host.get("heldBytes"))
                    .isEqualTo(host.get("reservedBytes"));
        } finally {
            done.countDown();
            viewer.join(10_000);
        }
    }

    /** OpenCL tells no free memory (-1): the details showed {@code freeBytes: -1}, a negative size. */
    @Test
    void freeMemoryTheBackendCannotTellIsLeftOutWithTheReason() {
        SimulatedDiscreteBackend simulated = new SimulatedDiscreteBackend(64L << 20);
        ComputeBackend noFreeFigure = (ComputeBackend) Proxy.newProxyInstance(getClass().getClassLoader(), new Class<?>[] {ComputeBackend.class},
                (proxy, method, args) -> method.getName().equals("memoryInfo")
                        ? new DeviceMemoryInfo(-1, 64L << 20)
                        : method.invoke(simulated, args));
        try (UnifiedMemoryManager blind = UnifiedMemoryManager.builder().backend(noFreeFigure).build()) {
            Health health = new ComputeHealthIndicator(observed(blind), new ComputeProperties.Health(0.5, 0.0, 0.9, 1.0, "UP")).health(true);
            assertThat(health.getStatus()).isEqualTo(Status.UP);
            assertThat(castMap(health.getDetails().get("device"))).containsEntry("totalBytes", 64L << 20)
                    .doesNotContainKeys("freeBytes", "usedRatio")
                    .containsEntry("memoryUnknown", "the simulated backend does not report the device's free memory");
            assertThat(health.getDetails()).as("no device-memory warning from a figure there is not").doesNotContainKey("warnings");
        }
    }

    @Test
    void downOnceTheManagerIsClosed() {
        manager.close();
        Health health = indicator(new ComputeProperties.Health(0.5, 0.9, 0.9, 1.0, "UP")).health(true);
        assertThat(health.getStatus()).isEqualTo(Status.DOWN);
        assertThat(health.getDetails()).containsEntry("reason", "the UnifiedMemoryManager is closed");
    }

    @Test
    void warnsWhenAPoolNearsItsCap() {
        try (UnifiedMemoryManager capped = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend(64L << 20))
                .maxPoolSize(8L << 20).pinningEnabled(false).build();
                UnifiedBuffer buffer = capped.allocate(7L << 20, MemoryLocation.DEVICE)) {
            Health health = new ComputeHealthIndicator(observed(capped), new ComputeProperties.Health(1.0, 1.0, 0.75, 1.0, "UP")).health(true);
            assertThat(health.getStatus()).isEqualTo(Status.UP);
            assertThat(castMap(castMap(health.getDetails().get("locations")).get(MemoryLocation.DEVICE)))
                    .containsEntry("capBytes", 8L << 20).extractingByKey("capUsedRatio").satisfies(ratio -> assertThat((double) ratio).isGreaterThan(0.75));
            assertThat((List<?>) health.getDetails().get("warnings")).singleElement().asString()
                    .startsWith("DEVICE pool holds").contains("compute.memory.pooling.max-pool-size").contains("compute.health.cap-warning-threshold");
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"WARNING", "OUT_OF_SERVICE", "DOWN"})
    void aPassedThresholdSetsTheStatusTheOperatorChose(String status) {
        try (UnifiedBuffer buffer = manager.allocate(1 << 20, MemoryLocation.DEVICE)) {
            Health health = indicator(new ComputeProperties.Health(0.5, 0.0, 0.9, 1.0, status)).health(true);
            assertThat(health.getStatus()).isEqualTo(new Status(status));
            assertThat((List<?>) health.getDetails().get("warnings")).singleElement().asString().startsWith("device memory is");
            assertThat(indicator(new ComputeProperties.Health(0.5, 1.0, 0.9, 1.0, status)).health(true).getStatus())
                    .as("no threshold passed").isEqualTo(Status.UP);
        }
    }

    @Test
    void aConfiguredBudgetNearItsLimitWarnsAndEveryConfiguredBudgetIsInTheDetails() {
        ComputeBudgets budgets = new ComputeBudgets();
        MemoryBudget tenant = manager.budget(BudgetSpec.of("tenant-a", 1 << 20).withReservation(MemoryLocation.DEVICE, 256 << 10));
        budgets.add("default", tenant, 1 << 20);
        budgets.add("another-manager", manager.budget("elsewhere", 1 << 20), 1 << 20);
        try (MemoryBudget unconfigured = manager.budget("made-at-run-time", 1 << 20);
             UnifiedBuffer held = tenant.allocate(900 << 10, MemoryLocation.DEVICE);
             UnifiedBuffer full = unconfigured.allocate(1 << 20, MemoryLocation.DEVICE)) {
            Health health = new ComputeHealthIndicator(observed(manager), new ComputeProperties.Health(1.0, 1.0, 1.0, 0.8, "WARNING"), budgets)
                    .health(true);

            assertThat(health.getStatus()).isEqualTo(new Status("WARNING"));
            assertThat(castMap(health.getDetails().get("budgets"))).containsOnlyKeys("tenant-a");
            assertThat(castMap(castMap(health.getDetails().get("budgets")).get("tenant-a"))).containsEntry("allocatedBytes", 900L << 10)
                    .containsEntry("limitBytes", 1L << 20).containsEntry("reservedBytes", 256L << 10);
            assertThat((List<?>) health.getDetails().get("warnings")).singleElement().asString()
                    .startsWith("memory budget 'tenant-a' holds 88% of a limit").contains("compute.health.budget-warning-threshold (80%)");
        }
        tenant.close();
        assertThat(new ComputeHealthIndicator(observed(manager), new ComputeProperties.Health(1.0, 1.0, 1.0, 0.8, "WARNING"), budgets)
                .health(true).getDetails()).as("a closed budget is no more").doesNotContainKey("budgets");
    }

    /**
     * A budget nearest its limit at one location: the warning gave that location's share with the bytes of the limit at
     * all locations ("88% of a limit (921600 of 4194304 bytes in all)", which is 22%), so its figures did not add up.
     */
    @Test
    void aBudgetNearItsLimitAtALocationWarnsWithThatLimitsBytes() {
        ComputeBudgets budgets = new ComputeBudgets();
        MemoryBudget tenant = manager.budget(BudgetSpec.of("tenant-a", 4 << 20).withLocationLimit(MemoryLocation.HOST, 1 << 20));
        budgets.add("default", tenant, 1 << 20);
        try (UnifiedBuffer held = tenant.allocate(900 << 10, MemoryLocation.HOST)) {
            Health health = new ComputeHealthIndicator(observed(manager), new ComputeProperties.Health(1.0, 1.0, 1.0, 0.8, "WARNING"), budgets)
                    .health(true);

            assertThat((List<?>) health.getDetails().get("warnings")).singleElement().asString()
                    .startsWith("memory budget 'tenant-a' holds 88% of its HOST limit (921600 of 1048576 bytes)");
        } finally {
            tenant.close();
        }
    }

    @Test
    void aShareJustAboveItsThresholdIsShownWithTheDecimalsThatTellThemApart() {
        assertThat(ComputeHealthIndicator.percents(0.88, 0.8)).containsExactly("88", "80");
        assertThat(ComputeHealthIndicator.percents(0.904, 0.9)).containsExactly("90.4", "90.0");
        assertThat(ComputeHealthIndicator.percents(0.0000025, 0.000001)).containsExactly("0.0003", "0.0001");
        assertThat(ComputeHealthIndicator.percents(0.5, 0.00001)).as("a threshold above 0 never reads 0%").containsExactly("50", "0.001");
    }

    private ComputeHealthIndicator indicator(ComputeProperties.Health thresholds) {
        return new ComputeHealthIndicator(observed(manager), thresholds);
    }

    private static ObservedManager observed(UnifiedMemoryManager manager) {
        return new ObservedManager("default", manager, new RecentMemoryStatistics(manager), true);
    }

    @SuppressWarnings("unchecked")
    private static Map<Object, Object> castMap(Object details) {
        return (Map<Object, Object>) details;
    }
}
