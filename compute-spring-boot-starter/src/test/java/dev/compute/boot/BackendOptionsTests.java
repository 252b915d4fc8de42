package dev.compute.boot;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.boot.diagnostics.InvalidSettingFailureAnalyzer;
import dev.compute.memory.InvalidSettingException;
import dev.compute.memory.UnifiedMemoryManager;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.boot.diagnostics.FailureAnalysis;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.core.env.Environment;

/** compute.backend-options.*: passed to the backend as they are, and checked against what the backend reads. */
@ExtendWith(OutputCaptureExtension.class)
class BackendOptionsTests {

    private final ApplicationContextRunner runner = new ApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(ComputeMemoryAutoConfiguration.class));

    @Test
    void theCpuBackendsOptionsReachItAndItReadsThem() {
        runner.withPropertyValues("compute.backend=cpu", "compute.backend-options.page-size=64KB", "compute.backend-options.pinned-fallback=fail")
                .run(context -> assertThat(context.getBean(UnifiedMemoryManager.class).settings().backendOptions())
                        .containsExactlyInAnyOrderEntriesOf(Map.of("page-size", "64KB", "pinned-fallback", "fail")));
        // read, not only passed on: a value the CPU backend refuses stops start-up under the property that set it
        AtomicReference<Environment> environment = new AtomicReference<>();
        runner.withPropertyValues("compute.backend=cpu", "compute.backend-options.page-size=3")
                .withInitializer(context -> environment.set(context.getEnvironment())).run(context -> {
                    assertThat(context).getFailure().rootCause().isInstanceOf(InvalidSettingException.class)
                            .extracting(e -> ((InvalidSettingException) e).property()).isEqualTo("compute.backend-options.page-size");
                    FailureAnalysis analysis = new InvalidSettingFailureAnalyzer(environment.get()).analyze(context.getStartupFailure());
                    assertThat(analysis.getDescription()).contains("Value: \"3\"").contains("Origin: \"compute.backend-options.page-size\"")
                            .contains("a positive multiple of the OS page size");
                });
    }

    @Test
    void underANamedBackendAnOptionItDoesNotReadStopsStartUp() {
        runner.withPropertyValues("compute.backend=cpu", "compute.backend-options.pagesize=64KB").run(context -> assertThat(context).getFailure()
                .rootCause().isInstanceOf(InvalidSettingException.class)
                .hasMessageContaining("compute.backend-options.pagesize").hasMessageContaining("page-size, pinned-fallback"));
    }

    @Test
    void theOpenClPropertiesOfASharedFileDoNotStopAnotherNamedBackend() {
        // production YAML sets compute.opencl.*; a test profile that names the cpu backend must still start
        runner.withPropertyValues("compute.backend=cpu", "compute.opencl.platform=pocl", "compute.opencl.device-type=cpu")
                .run(context -> assertThat(context.getBean(UnifiedMemoryManager.class).settings().backendOptions()).isEmpty());
        // but a typo in them is still one, whichever backend runs today
        runner.withPropertyValues("compute.backend=cpu", "compute.opencl.device-type=tpu")
                .run(context -> assertThat(context).getFailure().rootCause().isInstanceOf(InvalidSettingException.class)
                        .hasMessageContaining("compute.opencl.device-type"));
    }

    @Test
    void underAutoAnOptionTheChosenBackendDoesNotReadIsWarnedOf(CapturedOutput output) {
        runner.withPropertyValues("compute.backend-options.platform=pocl", "compute.backend-options.page-size=64KB")
                .run(context -> assertThat(context).hasNotFailed());
        assertThat(output).containsOnlyOnce("backend options [platform] are not read by the 'cpu' backend, which compute.backend=auto "
                + "chose: it reads [page-size, pinned-fallback]");
    }

    @Test
    void theOpenClPropertiesAreBackendOptionsByAnotherNameAndMayNotContradictThem() {
        ManagerProperties agreeing = managerWith(Map.of("platform", "pocl"), "pocl");
        assertThat(agreeing.options()).containsEntry("platform", "pocl");
        assertThatThrownBy(() -> managerWith(Map.of("platform", "nvidia"), "pocl").options()).isInstanceOf(InvalidSettingException.class)
                .hasMessageContaining("compute.opencl.platform").hasMessageContaining("compute.backend-options.platform ('nvidia')");
    }

    private static ManagerProperties managerWith(Map<String, String> options, String platform) {
        ComputeProperties defaults = new Binder(List.of(), null, PoolSizeConverter.conversionService()).bindOrCreate("compute", ComputeProperties.class);
        return new ManagerProperties("opencl", 0, defaults.memory(), new ComputeProperties.OpenCl(platform, null), options);
    }

    @Test
    void aBackendsOwnNameForAnOptionBecomesThePropertyThatSetsIt() {
        assertThat(BackendOptions.asProperty("page-size (an option of the cpu backend)")).contains("compute.backend-options.page-size");
        assertThat(BackendOptions.asProperty("compute.memory.pooling.max-pool-size")).isEmpty();
    }
}
