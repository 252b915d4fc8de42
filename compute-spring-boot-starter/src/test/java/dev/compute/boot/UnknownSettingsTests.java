package dev.compute.boot;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.UnifiedMemoryManager;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.autoconfigure.ImportAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;

/**
 * A manager's or a budget's key that the starter does not read stops start-up naming it, rather than start a manager or
 * a tenant other than the one written: a dot in a manager's name makes another manager with default settings, and a
 * dot in a budget's name or a typo in its keys drops the tenant (its requests would run without any budget).
 */
@ExtendWith(OutputCaptureExtension.class)
class UnknownSettingsTests {

    private final ApplicationContextRunner runner = new ApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(ComputeMemoryAutoConfiguration.class))
            .withPropertyValues("compute.memory.timeline.interval=0", "compute.memory.pooling.max-pool-size=64MB");

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
            "compute.managers.my.gpu.backend=cpu | compute.managers.my.gpu.backend",
            "compute.managers.gpu.backnd=cpu | compute.managers.gpu.backnd",
            "compute.managers.gpu.backend=cpu;compute.managers.gpu.health.cap-warning-threshold=0.5 | compute.managers.gpu.health.cap-warning-threshold",
            "compute.managers.gpu.backend=cpu;compute.managers.gpu.budgets.t.limt=1MB | compute.managers.gpu.budgets.t.limt",
            "compute.backend=cpu;compute.budgets.tenant.a.limit=1MB | compute.budgets.tenant.a.limit",
            "compute.backend=cpu;compute.budgets.a.limit=1MB;compute.budgets.a.parent=b | compute.budgets.a.parent",
            "compute.memroy.pooling.max-pool-size=1GB | compute.memroy.pooling.max-pool-size",
            "compute.memory.pooling.max-pol-size=1GB | compute.memory.pooling.max-pol-size",
            "compute.healt.cap-warning-threshold=0.5 | compute.healt.cap-warning-threshold",
            "compute.managers.gpu.backend=cpu;compute.memory.poolng.enabled=false | compute.memory.poolng.enabled",
            // the page's old switch: the page is the endpoint computememorymap, which this would not switch off
            "compute.memory-map.enabled=false | compute.memory-map.enabled"})
    void anUnknownKeyStopsStartUpNamingIt(String settings, String property) {
        runner.withPropertyValues(settings.split(";")).run(context -> {
            assertThat(context).hasFailed();
            StringBuilder chain = new StringBuilder();
            for (Throwable t = context.getStartupFailure(); t != null; t = t.getCause()) {
                chain.append(t).append('\n');
            }
            assertThat(chain.toString()).contains(property);
        });
    }

    /** {@code budgets:} with nothing under it is no budgets, for a named manager as for compute.budgets. */
    @Test
    void anEmptyBudgetsKeyStarts() {
        runner.withPropertyValues("compute.managers.gpu.backend=cpu", "compute.managers.gpu.budgets=")
                .run(context -> assertThat(context).hasNotFailed());
        runner.withPropertyValues("compute.backend=cpu", "compute.budgets=").run(context -> assertThat(context).hasNotFailed());
    }

    @Test
    void bootsFailureReportNamesTheKey(CapturedOutput output) {
        assertThatThrownBy(() -> new SpringApplicationBuilder(App.class).web(WebApplicationType.NONE)
                .run("--compute.managers.my.gpu.backend=cpu").close()).isInstanceOf(RuntimeException.class);
        assertThat(output).contains("APPLICATION FAILED TO START").contains("compute.managers.my.gpu.backend");
    }

    /** Left empty, an unknown key is still an unknown key: not a report of what some value "of the documented form" allows. */
    @ParameterizedTest
    @CsvSource({"compute.health.enabled", "compute.memory.pooling.max-pol-size", "compute.managers.gpu.memory.poolng.enabled"})
    void anUnknownKeyLeftEmptyIsReportedAsUnknown(String property, CapturedOutput output) {
        assertThatThrownBy(() -> new SpringApplicationBuilder(App.class).web(WebApplicationType.NONE)
                .run("--" + property + "=", "--compute.managers.gpu.backend=cpu").close()).isInstanceOf(RuntimeException.class);
        assertThat(output).contains("APPLICATION FAILED TO START").contains(property).contains("left unbound")
                .doesNotContain("documented form");
    }

    /**
     * A list that a source above empties (a profile's file with {@code warmup: device: []} over the application's
     * warm-up) is set, not unknown: Boot binds it from that source alone, and the elements below it were reported as
     * left unbound, stopping the start.
     */
    @Test
    void aListASourceAboveEmptiesStartsWithoutIt() {
        try (var context = new SpringApplicationBuilder(App.class).web(WebApplicationType.NONE)
                .properties("compute.backend=cpu", "compute.memory.pooling.max-pool-size=64MB", "compute.memory.pooling.warmup.host[0].size=1MB")
                .run("--compute.memory.pooling.warmup.host=")) {
            assertThat(context.getBean(UnifiedMemoryManager.class).settings().warmup()).isEmpty();
        }
        try (var context = new SpringApplicationBuilder(App.class).web(WebApplicationType.NONE)
                .properties("compute.managers.gpu.backend=cpu", "compute.managers.gpu.memory.pooling.max-pool-size=64MB",
                        "compute.managers.gpu.memory.pooling.warmup.host[0].size=1MB")
                .run("--compute.managers.gpu.memory.pooling.warmup.host=")) {
            assertThat(context.getBean(UnifiedMemoryManager.class).settings().warmup()).isEmpty();
        }
    }

    @SpringBootConfiguration
    @ImportAutoConfiguration(ComputeMemoryAutoConfiguration.class)
    static class App {}

    @Test
    void everyKnownKeyStillStarts() {
        runner.withPropertyValues("compute.managers.gpu.backend=cpu", "compute.managers.gpu.memory.pooling.warmup.host[0].size=1MB",
                "compute.managers.gpu.memory.pooling.max-pool-size=50%", "compute.managers.gpu.backend-options.page-size=64KB",
                "compute.managers.gpu.budgets.t.limit=1MB", "compute.managers.gpu.budgets.t.location-limits.host=1MB",
                "compute.managers.gpu.budgets.t.reservations.host=1MB", "compute.managers.gpu.budgets.t.request-limit=1MB",
                "compute.managers.cpu=", "compute.managers.cpu.device=0", "compute.managers.cpu.memory.leak-detection=paranoid",
                "compute.managers.cpu.opencl.device-type=cpu", "compute.managers.cpu.memory.recording.max-events=10").run(context -> {
                    assertThat(context).hasNotFailed();
                    assertThat(context.getBean("gpuUnifiedMemoryManager", UnifiedMemoryManager.class).budgets()).hasSize(1);
                });
        runner.withPropertyValues("compute.enabled=true", "compute.health.cap-warning-threshold=0.5",
                "compute.scopes.requests=true", "compute.backend-options.page-size=64KB", "compute.memory.pooling.warmup.host[0].size=1MB",
                "compute.memory.recording.max-events=10", "compute.opencl.device-type=cpu", "compute.primary=")
                .run(context -> assertThat(context).hasNotFailed());
        // relaxed: camel case and underscores, as application.properties may write them
        runner.withPropertyValues("compute.memory.pooling.maxPoolSize=32MB", "compute.memory.leak_detection=disabled", "compute.backendOptions.page-size=64KB")
                .run(context -> assertThat(context).hasNotFailed());
        runner.withPropertyValues("compute.backend=cpu", "compute.budgets.t.limit=1MB", "compute.budgets.t.location-limits.host=1MB",
                "compute.budgets.t.reservations.host=1MB", "compute.budgets.t.request-limit=1MB").run(context -> assertThat(context).hasNotFailed());
    }
}
