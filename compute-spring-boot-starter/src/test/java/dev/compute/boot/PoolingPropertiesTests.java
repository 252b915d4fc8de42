package dev.compute.boot;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.boot.diagnostics.ComputeBindFailureAnalyzer;
import dev.compute.boot.diagnostics.InvalidSettingFailureAnalyzer;
import dev.compute.memory.InvalidSettingException;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemoryStatistics;
import dev.compute.memory.PoolSize;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.WarmupBlocks;
import java.math.BigDecimal;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.diagnostics.FailureAnalysis;
import org.springframework.boot.test.context.ConfigDataApplicationContextInitializer;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.core.env.Environment;

/** {@code max-pool-size} as a share of the device's memory and {@code warmup}, from YAML and properties to the manager. */
@ExtendWith(OutputCaptureExtension.class)
class PoolingPropertiesTests {

    private static final long MiB = 1L << 20;

    private final ApplicationContextRunner runner = new ApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(ComputeMemoryAutoConfiguration.class));

    /**
     * A cap above the device's memory (100TB on the CPU backend) never binds: allocations fail as the device runs out
     * first, and health's cap warning never comes. It is no mistake to refuse: the default 4GB is above a small
     * container's memory, and a generous cap meant as none is common. It started silently; it is told once, at start,
     * naming the property where it was set.
     */
    @Test
    void aCapAboveTheDevicesMemoryIsToldOnceAtStart(CapturedOutput output) {
        runner.withPropertyValues("compute.backend=cpu", "compute.memory.timeline.interval=0", "compute.managers.big.backend=cpu",
                "compute.managers.big.memory.pooling.max-pool-size=100TB", "compute.managers.small.backend=cpu",
                "compute.managers.small.memory.pooling.max-pool-size=64MB").run(context -> {
                    assertThat(context).hasNotFailed();
                    long device = context.getBean("bigUnifiedMemoryManager", UnifiedMemoryManager.class).backendInfo().deviceTotalBytes();
                    assertThat(output.toString().split("compute.managers.big.memory.pooling.max-pool-size of manager 'big' is "
                            + (100L << 40) + " bytes, more than the " + device + " bytes", -1)).as("told once").hasSize(2);
                    assertThat(output).doesNotContain("of manager 'small' is");
                });
    }

    @Test
    void aCapAboveTheDevicesMemoryInheritedFromComputeMemoryIsToldWhereItIsSet(CapturedOutput output) {
        runner.withPropertyValues("compute.backend=cpu", "compute.memory.timeline.interval=0", "compute.memory.pooling.max-pool-size=100TB",
                "compute.managers.inherits.backend=cpu").run(context -> {
                    assertThat(context).hasNotFailed();
                    assertThat(output).contains("compute.memory.pooling.max-pool-size of manager 'inherits' is " + (100L << 40) + " bytes");
                });
    }

    @Test
    void aShareAndAWarmUpFromYamlReachTheManager() {
        runner.withInitializer(new ConfigDataApplicationContextInitializer())
                .withPropertyValues("spring.config.location=classpath:allocation/share-and-warmup.yml")
                .run(context -> {
                    assertThat(context).hasNotFailed();
                    UnifiedMemoryManager manager = context.getBean(UnifiedMemoryManager.class);
                    long total = manager.deviceMemory().totalBytes();
                    assertThat(manager.settings().maxPoolSize()).isEqualTo(BigDecimal.valueOf(total).multiply(BigDecimal.valueOf(0.5)).longValue());
                    assertThat(manager.settings().maxPoolSizeShare()).isEqualTo(0.5);
                    assertThat(manager.settings().warmup()).isEqualTo(Map.of(MemoryLocation.HOST,
                            List.of(new WarmupBlocks(4 * MiB, 4), new WarmupBlocks(64 * 1024, 1))));
                    MemoryStatistics host = manager.statistics(MemoryLocation.HOST);
                    assertThat(host.reservedBytes()).isGreaterThanOrEqualTo(16 * MiB + 64 * 1024);
                    assertThat(host.cachedBytes()).isEqualTo(host.reservedBytes());
                });
    }

    @ParameterizedTest
    @CsvSource({"512MB, 536870912", "4GB, 4294967296", "4194304, 4194304"})
    void sizesStillConvertAsBefore(String value, long bytes) {
        runner.withPropertyValues("compute.memory.pooling.max-pool-size=" + value, "compute.memory.pooling.release-threshold=0").run(context -> {
            assertThat(context.getBean(ComputeProperties.class).memory().pooling().maxPoolSize()).isEqualTo(PoolSize.ofBytes(bytes));
            assertThat(context.getBean(UnifiedMemoryManager.class).settings().maxPoolSize()).isEqualTo(bytes);
            assertThat(context.getBean(UnifiedMemoryManager.class).settings().maxPoolSizeShare()).isNull();
        });
    }

    @Test
    void aWarmUpFromPropertiesWithTheCountLeftOutIsOneBlock() {
        runner.withPropertyValues("compute.memory.pooling.warmup.unified[0].size=2MB").run(context ->
                assertThat(context.getBean(UnifiedMemoryManager.class).settings().warmup())
                        .isEqualTo(Map.of(MemoryLocation.UNIFIED, List.of(new WarmupBlocks(2 * MiB, 1)))));
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
            "compute.memory.pooling.max-pool-size=0%     | compute.memory.pooling.max-pool-size | 0%   | above 0% and at most 100%",
            "compute.memory.pooling.max-pool-size=120%   | compute.memory.pooling.max-pool-size | 120% | above 0% and at most 100%",
            "compute.memory.pooling.max-pool-size=-5%    | compute.memory.pooling.max-pool-size | -5%  | above 0% and at most 100%",
            "compute.memory.pooling.warmup.host[0].size=64MB;compute.memory.pooling.warmup.host[0].count=2;compute.memory.pooling.release-threshold=64MB"
                    + " | compute.memory.pooling.warmup.host | 134217728 bytes in all | at most compute.memory.pooling.release-threshold (67108864 bytes)",
            "compute.backend=cpu;compute.memory.pooling.max-pool-size=5MB;compute.memory.pooling.warmup.host[0].size=1MB;compute.memory.pooling.warmup.host[0].count=5"
                    + " | compute.memory.pooling.warmup.host | 5242880 bytes in all | a warm-up whose blocks fit under compute.memory.pooling.max-pool-size"
                    + " (5242880 bytes) in the pool's pieces (pages of 2097152 bytes), where they take 6291456 bytes; raise",
            "compute.memory.pooling.warmup.host[0].size=0 | compute.memory.pooling.warmup.host | 1 x 0 bytes | blocks of a positive size",
            "compute.memory.pooling.warmup.host[0].count=3 | compute.memory.pooling.warmup.host[0].size | '' | a value is required",
            "compute.memory.pooling.warmup.host[0].size=1MB;compute.memory.pooling.enabled=false | compute.memory.pooling.warmup | {HOST=[1 x 1048576 bytes]} | compute.memory.pooling.enabled is false",
            "compute.memory.pooling.warmup.gpu[0].size=1MB | compute.memory.pooling.warmup.gpu | gpu | a location: device, host, pinned or unified",
            "compute.memory.pooling.warmup.[ho\u017Ft][0].size=1MB | compute.memory.pooling.warmup.ho\u017Ft | ho\u017Ft | a location: device, host, pinned or unified",
    })
    void aBadShareOrWarmUpStopsStartUpNamingThePropertyAndWhatIsAllowed(String settings, String property, String value, String allowed) {
        AtomicReference<Environment> environment = new AtomicReference<>();
        runner.withPropertyValues(settings.split(";")).withInitializer(context -> environment.set(context.getEnvironment())).run(context -> {
            assertThat(context).hasFailed();
            assertThat(context).getFailure().rootCause().isInstanceOf(InvalidSettingException.class);
            FailureAnalysis analysis = new InvalidSettingFailureAnalyzer(environment.get()).analyze(context.getStartupFailure());
            assertThat(analysis).isNotNull();
            assertThat(analysis.getDescription()).contains("Property: " + property).contains("Value: \"" + value + "\"").contains("Allowed: ")
                    .contains(allowed);
            assertThat(analysis.getAction()).startsWith("Change " + property + " to ");
        });
    }

    @ParameterizedTest
    @ValueSource(strings = {"abc", "80 percent", "%", "4XB"})
    void aMaxPoolSizeThatIsNeitherASizeNorAShareIsReportedWithBothForms(String value) {
        runner.withPropertyValues("compute.memory.pooling.max-pool-size=" + value).run(context -> {
            assertThat(context).hasFailed();
            FailureAnalysis analysis = new ComputeBindFailureAnalyzer(null).analyze(context.getStartupFailure());
            assertThat(analysis).isNotNull();
            assertThat(analysis.getDescription()).contains("Property: compute.memory.pooling.max-pool-size").contains("Value: \"" + value + "\"")
                    .contains("Allowed: " + PoolSizeConverter.ALLOWED);
        });
    }
}
