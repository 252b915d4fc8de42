package dev.compute.boot;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.boot.diagnostics.InvalidSettingFailureAnalyzer;
import dev.compute.memory.BudgetStatistics;
import dev.compute.memory.MemoryBudget;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedMemoryManager;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.diagnostics.FailureAnalysis;
import org.springframework.boot.env.YamlPropertySourceLoader;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.core.env.Environment;
import org.springframework.core.io.ByteArrayResource;

/** Budgets from compute.budgets.* and compute.managers.<name>.budgets.*: made with their managers, and what stops start-up. */
class ComputeBudgetsTests {

    private static final long MiB = 1L << 20;

    private final ApplicationContextRunner runner = new ApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(ComputeMemoryAutoConfiguration.class))
            .withPropertyValues("compute.backend=cpu", "compute.memory.timeline.interval=0", "compute.memory.pooling.max-pool-size=64MB");

    @Test
    void theOneManagersBudgetsAreMadeWithItAndCloseWithIt() {
        AtomicReference<MemoryBudget> kept = new AtomicReference<>();
        runner.withPropertyValues("compute.budgets.tenant-a.limit=16MB", "compute.budgets.tenant-a.reservations.host=8MB",
                "compute.budgets.tenant-a.location-limits.host=12MB", "compute.budgets.tenant-a.request-limit=4MB",
                "compute.budgets.tenant-b.limit=32MB").run(context -> {
                    ComputeBudgets budgets = context.getBean(ComputeBudgets.class);
                    UnifiedMemoryManager manager = context.getBean(UnifiedMemoryManager.class);
                    assertThat(manager.budgets()).extracting(MemoryBudget::name).containsExactly("tenant-a", "tenant-b");
                    MemoryBudget tenant = budgets.budget("tenant-a").orElseThrow();
                    kept.set(tenant);
                    BudgetStatistics figures = tenant.statistics();
                    assertThat(figures.limitBytes()).isEqualTo(16 * MiB);
                    assertThat(figures.reservedBytes()).isEqualTo(8 * MiB);
                    assertThat(figures.locations().get(MemoryLocation.HOST).limitBytes()).isEqualTo(12 * MiB);
                    assertThat(budgets.find("default", "tenant-a").orElseThrow().requestLimitBytes()).isEqualTo(4 * MiB);
                    assertThat(budgets.find("default", "tenant-b").orElseThrow().requestLimitBytes()).isEqualTo(32 * MiB);
                    assertThat(budgets.isConfigured(tenant)).isTrue();
                    try (MemoryBudget request = tenant.child("request", MiB)) {
                        assertThat(budgets.isConfigured(request)).isFalse();
                        assertThat(budgets.configuredFor(request)).map(ComputeBudgets.Configured::name).hasValue("tenant-a");
                    }
                });
        assertThat(kept.get().isClosed()).as("closed with its manager").isTrue();
    }

    @Test
    void eachNamedManagerHasItsOwnBudgetsAndNoneInherited() {
        runner.withPropertyValues("compute.managers.cpu.backend=cpu", "compute.managers.gpu.backend=cpu",
                "compute.managers.gpu.budgets.tenant-a.limit=8MB", "compute.primary=gpu").run(context -> {
                    ComputeBudgets budgets = context.getBean(ComputeBudgets.class);
                    assertThat(context.getBean("cpuUnifiedMemoryManager", UnifiedMemoryManager.class).budgets()).isEmpty();
                    assertThat(budgets.budget("gpu", "tenant-a")).isPresent();
                    assertThat(budgets.budget("tenant-a")).as("on the primary manager").isPresent();
                    assertThat(budgets.budget("cpu", "tenant-a")).isEmpty();
                });
    }

    /**
     * Where the application's own {@code @Primary} manager is the one injected, no named manager is primary, and a
     * budget looked up by name alone is not the first named manager's: that one was taken as primary for budgets, so
     * {@code budget("tenant-a")} gave big's though small has one too and neither is the primary manager. A name only
     * one manager has is still that one's.
     */
    @Test
    void anApplicationsOwnPrimaryManagerBesideNamedOnesMakesNoNamedManagersBudgetsThePrimarys() {
        runner.withPropertyValues("compute.managers.big.backend=cpu", "compute.managers.small.backend=cpu",
                "compute.managers.big.budgets.tenant-a.limit=8MB", "compute.managers.small.budgets.tenant-a.limit=8MB",
                "compute.managers.small.budgets.tenant-b.limit=8MB").withUserConfiguration(NamedManagersTests.OwnPrimaryManager.class)
                .run(context -> {
                    ComputeBudgets budgets = context.getBean(ComputeBudgets.class);
                    assertThat(budgets.budget("tenant-a")).as("big's and small's: neither manager is primary").isEmpty();
                    assertThat(budgets.budget("big", "tenant-a")).isPresent();
                    assertThat(budgets.budget("tenant-b")).as("small's alone").containsSame(budgets.budget("small", "tenant-b").orElseThrow());
                });
    }

    @Test
    void budgetsUnderComputeWithNamedManagersStopStartUp() {
        assertFailure(runner.withPropertyValues("compute.managers.gpu.backend=cpu", "compute.budgets.tenant-a.limit=8MB"), "compute.budgets",
                "tenant-a", "compute.managers.gpu.budgets");
    }

    @Test
    void aReservationThatDoesNotFitUnderTheCapStopsStartUpNamingItAndTheCap() {
        assertFailure(runner.withPropertyValues("compute.budgets.gold.limit=64MB", "compute.budgets.gold.reservations.host=48MB",
                        "compute.budgets.silver.limit=64MB", "compute.budgets.silver.reservations.host=32MB"),
                "compute.budgets.silver.reservations.host", "33554432 bytes", "compute.memory.pooling.max-pool-size (67108864 bytes)");
        assertFailure(runner.withPropertyValues("compute.memory.pinning.enabled=false", "compute.budgets.gold.limit=64MB",
                "compute.budgets.gold.reservations.pinned=1MB"), "compute.budgets.gold.reservations.pinned", "1048576 bytes", "a location this manager has");
    }

    @Test
    void aLocationLimitAboveTheBudgetsLimitStopsStartUpNamingBoth() {
        assertFailure(runner.withPropertyValues("compute.budgets.gold.limit=16MB", "compute.budgets.gold.location-limits.host=32MB"),
                "compute.budgets.gold.location-limits.host", "33554432 bytes", "at most compute.budgets.gold.limit (16777216 bytes)");
    }

    /** As a reservation there is: a limit at a location the manager does not have (pinning off) limits nothing, and started silently. */
    @Test
    void aLocationLimitAtALocationTheManagerDoesNotHaveStopsStartUpNamingItsLocations() {
        assertFailure(runner.withPropertyValues("compute.memory.pinning.enabled=false", "compute.budgets.gold.limit=64MB",
                        "compute.budgets.gold.location-limits.pinned=1MB"),
                "compute.budgets.gold.location-limits.pinned", "1048576 bytes", "a location limit at a location this manager has: device, host, unified");
        assertFailure(runner.withPropertyValues("compute.managers.gpu.backend=cpu", "compute.managers.gpu.memory.pinning.enabled=false",
                        "compute.managers.gpu.budgets.gold.limit=64MB", "compute.managers.gpu.budgets.gold.location-limits.pinned=1MB"),
                "compute.managers.gpu.budgets.gold.location-limits.pinned", "1048576 bytes", "a location this manager has");
    }

    @Test
    void aNamedManagersReservationIsReportedUnderItsNameAndItsOwnCap() {
        assertFailure(runner.withPropertyValues("compute.managers.gpu.backend=cpu", "compute.managers.gpu.memory.pooling.max-pool-size=16MB",
                        "compute.managers.gpu.budgets.gold.limit=64MB", "compute.managers.gpu.budgets.gold.reservations.host=32MB"),
                "compute.managers.gpu.budgets.gold.reservations.host", "33554432 bytes", "compute.managers.gpu.memory.pooling.max-pool-size");
    }

    /**
     * Spring's relaxed binding keeps only the letters, digits and dashes of a map key not in brackets: written in YAML,
     * each of these budgets would start under another name ("ab", "a") rather than stop start-up.
     */
    @Test
    void aBudgetNameTheBindingWouldRenameStopsStartUpNamingItAsWritten() {
        assertFailure(yaml("compute:\n  budgets:\n    a/b:\n      limit: 1MB\n"), "compute.budgets.a/b", "a/b", "Spring's binding would make it 'ab'");
        assertFailure(yaml("compute:\n  budgets:\n    \"tenant a\":\n      limit: 1MB\n"), "compute.budgets.tenant a", "tenant a",
                "would make it 'tenanta'");
        assertFailure(yaml("compute:\n  budgets:\n    \"-a\":\n      limit: 1MB\n"), "compute.budgets.-a", "-a", "would make it 'a'");
        assertFailure(yaml("compute:\n  budgets:\n    \"gold\\a\":\n      limit: 1MB\n"), "compute.budgets.gold\\u0007", "gold\\u0007",
                "would make it 'gold'");
        assertFailure(yaml("compute:\n  managers:\n    gpu:\n      backend: cpu\n      budgets:\n        a/b:\n          limit: 1MB\n"),
                "compute.managers.gpu.budgets.a/b", "a/b", "a budget name of lower-case letters, digits and dashes, as written (Byte array resource [resource loaded from byte array] - 7:18)");
    }

    /**
     * A name of letters that are no ASCII letters: Spring's binding fails on it ("No converter found") without saying
     * which key; start-up stops naming it as written, as for any name the binding would not take as it is.
     */
    @Test
    void aBudgetNameOfOtherLettersStopsStartUpNamingItAsWritten() {
        assertFailure(yaml("compute:\n  budgets:\n    é:\n      limit: 1MB\n"), "compute.budgets.é", "é",
                "a budget name of lower-case letters, digits and dashes, as written");
        assertFailure(yaml("compute:\n  budgets:\n    tenant-ß:\n      limit: 1MB\n"), "compute.budgets.tenant-ß", "tenant-ß",
                "a budget name of lower-case letters, digits and dashes, as written");
        assertFailure(yaml("compute:\n  managers:\n    x:\n      backend: cpu\n      budgets:\n        é:\n          limit: 1MB\n"),
                "compute.managers.x.budgets.é", "é", "a budget name of lower-case letters, digits and dashes, as written");
        assertFailure(yaml("compute:\n  managers:\n    gpü:\n      backend: cpu\n"), "compute.managers.gpü", "gpü",
                "a manager name of lower-case letters, digits and dashes, as written");
    }

    /**
     * A list where the map of names is expected ({@code - limit: 1MB}): Spring's binding takes the index for a name, so
     * a budget "0" (or a manager "0") started that no request or meter was meant to find.
     */
    @Test
    void aListOfBudgetsOrManagersStopsStartUp() {
        assertFailure(yaml("compute:\n  budgets:\n    - limit: 1MB\n"), "compute.budgets[0]", "[0]",
                "a budget name of lower-case letters, digits and dashes, as a key of a map (the name, then its settings under it), not an element of a list");
        assertFailure(yaml("compute:\n  managers:\n    - backend: cpu\n"), "compute.managers[0]", "[0]",
                "a manager name of lower-case letters, digits and dashes, as a key of a map");
        assertFailure(yaml("compute:\n  managers:\n    gpu:\n      backend: cpu\n      budgets:\n        - limit: 1MB\n"),
                "compute.managers.gpu.budgets[0]", "[0]", "not an element of a list");
    }

    /** The binding takes tenant-a and tenanta for one name: each budget would be made with settings of the other. */
    @Test
    void twoBudgetNamesTheBindingTakesForOneStopStartUp() {
        assertFailure(yaml("compute:\n  budgets:\n    tenanta:\n      limit: 2MB\n    tenant-a:\n      limit: 1MB\n      request-limit: 1MB\n"),
                "compute.budgets.tenant-a", "tenant-a", "a budget name that does not differ from compute.budgets.tenanta only by dashes or case");
    }

    private ApplicationContextRunner yaml(String yaml) {
        return runner.withInitializer(context -> {
            try {
                new YamlPropertySourceLoader().load("yaml", new ByteArrayResource(yaml.getBytes(StandardCharsets.UTF_8)))
                        .forEach(context.getEnvironment().getPropertySources()::addLast);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        });
    }

    /** A budget added for a manager is observed as that manager's (its meters, health, a request's gpu/search): it must be that manager's. */
    @Test
    void aBudgetAddedForAnotherManagerThanItsOwnIsRefused() {
        runner.withPropertyValues("compute.managers.cpu.backend=cpu", "compute.managers.gpu.backend=cpu").run(context -> {
            ComputeBudgets budgets = context.getBean(ComputeBudgets.class);
            try (MemoryBudget onCpu = context.getBean("cpuUnifiedMemoryManager", UnifiedMemoryManager.class).budget("runtime", 4 * MiB)) {
                org.assertj.core.api.Assertions.assertThatThrownBy(() -> budgets.add("gpu", onCpu, MiB)).isInstanceOf(IllegalArgumentException.class)
                        .hasMessage("memory budget 'runtime' is not a budget of manager 'gpu': add it for the manager that made it");
                assertThat(budgets.all()).as("nothing observed").isEmpty();
                // a name none of the starter's managers has (a typo): no meters, health or gpu/runtime would ever find the budget
                org.assertj.core.api.Assertions.assertThatThrownBy(() -> budgets.add("cpuu", onCpu, MiB)).isInstanceOf(IllegalArgumentException.class)
                        .hasMessage("memory budget 'runtime' is not a budget of manager 'cpuu' but of 'cpu': add it for the manager that made it");
                assertThat(budgets.all()).as("nothing observed").isEmpty();
                assertThat(budgets.add("cpu", onCpu, MiB).manager()).isEqualTo("cpu");
            }
        });
    }

    /** As YAML refuses a request-limit that is not positive or above the budget's limit, so does adding a budget at run time. */
    @Test
    void aBudgetAddedWithARequestLimitThatMakesNoSenseIsRefused() {
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend("cpu").timelineInterval(java.time.Duration.ZERO).build();
             MemoryBudget tenant = manager.budget("runtime", 4 * MiB)) {
            ComputeBudgets budgets = new ComputeBudgets();
            for (long requestLimit : new long[] {0, -1, 4 * MiB + 1}) {
                org.assertj.core.api.Assertions.assertThatThrownBy(() -> budgets.add("default", tenant, requestLimit))
                        .isInstanceOf(IllegalArgumentException.class)
                        .hasMessage("the request limit of memory budget 'runtime' must be positive and at most its limit of " + 4 * MiB
                                + " bytes: " + requestLimit + " bytes");
            }
            assertThat(budgets.all()).as("nothing observed").isEmpty();
            assertThat(budgets.add("default", tenant, 4 * MiB).requestLimitBytes()).isEqualTo(4 * MiB);
        }
    }

    private static void assertFailure(ApplicationContextRunner runner, String property, String value, String allowed) {
        AtomicReference<Environment> environment = new AtomicReference<>();
        runner.withInitializer(context -> environment.set(context.getEnvironment())).run(context -> {
            assertThat(context).hasFailed();
            FailureAnalysis analysis = new InvalidSettingFailureAnalyzer(environment.get()).analyze(context.getStartupFailure());
            assertThat(analysis).as("%s", context.getStartupFailure()).isNotNull();
            assertThat(analysis.getDescription()).contains("Property: " + property + "\n").contains("Value: \"" + value + "\"")
                    .contains(allowed);
            assertThat(analysis.getAction()).startsWith("Change " + property + " to ");
        });
    }
}
