package dev.compute.boot;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import dev.compute.boot.diagnostics.BackendUnavailableFailureAnalyzer;
import dev.compute.boot.diagnostics.ComputeBindFailureAnalyzer;
import dev.compute.boot.diagnostics.InvalidSettingFailureAnalyzer;
import dev.compute.boot.testing.UnattachedDeviceBackendProvider;
import dev.compute.memory.BackendUnavailableException;
import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.InvalidSettingException;
import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.PoolSize;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import dev.compute.memory.spi.BackendSettings;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;
import org.slf4j.LoggerFactory;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.diagnostics.FailureAnalysis;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.env.Environment;
import org.springframework.util.unit.DataSize;

class ComputeMemoryAutoConfigurationTests {

    private final ApplicationContextRunner runner = new ApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(ComputeMemoryAutoConfiguration.class));

    @Test
    void defaultsGiveAManagerOnTheCpuBackendWithTheDesignDefaults() {
        runner.run(context -> {
            assertThat(context).hasSingleBean(UnifiedMemoryManager.class);
            UnifiedMemoryManager manager = context.getBean(UnifiedMemoryManager.class);
            assertThat(manager.backendInfo().backend()).isEqualTo("cpu");
            assertThat(manager.defaultLocation()).isEqualTo(MemoryLocation.HOST);

            ComputeProperties properties = context.getBean(ComputeProperties.class);
            assertThat(properties.backend()).isEqualTo("auto");
            assertThat(properties.memory().pooling().maxPoolSize()).isEqualTo(PoolSize.ofBytes(DataSize.ofGigabytes(4).toBytes()));
            assertThat(properties.memory().pooling().releaseThreshold()).as("unset: 256MB, or max-pool-size where smaller").isNull();
            assertThat(properties.memory().pooling().trimInterval()).isEqualTo(Duration.ofMinutes(5));
            assertThat(properties.memory().pooling().compactionInterval()).as("only when asked").isZero();
            assertThat(manager.settings().compactionInterval()).isZero();
            assertThat(properties.memory().pooling().compactOnOutOfMemory()).isTrue();
            assertThat(manager.settings().compactOnOutOfMemory()).isTrue();
            assertThat(properties.memory().pinning().maxPinnedSize()).isEqualTo(DataSize.ofGigabytes(2));
            assertThat(properties.memory().pinning().stagingBufferSize()).as("unset: 16MB, or max-pinned-size where smaller").isNull();
            assertThat(properties.memory().leakDetection()).isEqualTo(LeakDetectionLevel.SIMPLE);
            assertThat(properties.health().fragmentationWarningThreshold()).isEqualTo(0.5);
            assertThat(properties.health().capWarningThreshold()).isEqualTo(0.9);
            assertThat(properties.health().statusOnWarning()).isEqualTo("UP");
            assertThat(properties.memory().outOfMemoryRetries()).isEqualTo(3);
            assertThat(properties.backendOptions()).isEmpty();
            assertThat(properties.primary()).isNull();
            assertThat(manager.settings().outOfMemoryRetries()).isEqualTo(3);
        });
    }

    @Test
    void autoLogsTheChosenBackendAndWhyTheOthersWerePassedOver() {
        // the core's System.Logger goes to SLF4J (the starter brings its LoggerFinder), so Logback's logger has the record
        ch.qos.logback.classic.Logger logger = (ch.qos.logback.classic.Logger) LoggerFactory.getLogger(UnifiedMemoryManager.class.getName());
        ListAppender<ILoggingEvent> appender = new ListAppender<>();
        appender.start();
        logger.addAppender(appender);
        try {
            runner.run(context -> assertThat(context.getBean(UnifiedMemoryManager.class).backendInfo().backend()).isEqualTo("cpu"));
        } finally {
            logger.detachAppender(appender);
        }
        assertThat(appender.list).extracting(ILoggingEvent::getFormattedMessage).anySatisfy(message -> assertThat(message)
                .contains("'cpu' chosen").contains(UnattachedDeviceBackendProvider.NAME).contains(UnattachedDeviceBackendProvider.REASON));
    }

    @Test
    void propertiesReachTheManager() {
        runner.withPropertyValues("compute.memory.default-location=unified", "compute.memory.pinning.enabled=false",
                "compute.memory.leak-detection=paranoid", "compute.memory.pooling.max-pool-size=8MB",
                "compute.memory.pooling.release-threshold=0", "compute.memory.pooling.compact-on-out-of-memory=false")
                .run(context -> {
                    UnifiedMemoryManager manager = context.getBean(UnifiedMemoryManager.class);
                    assertThat(manager.defaultLocation()).isEqualTo(MemoryLocation.UNIFIED);
                    assertThat(manager.settings().compactOnOutOfMemory()).isFalse();
                    assertThat(manager.locations()).doesNotContain(MemoryLocation.PINNED);
                    try (UnifiedBuffer buffer = manager.allocate(4096)) {
                        assertThat(manager.liveBuffers()).singleElement()
                                .satisfies(live -> assertThat(live.allocationSite()).contains(getClass().getName()));
                    }
                    assertThatThrownBy(() -> manager.allocate(64L << 20)).isInstanceOf(DeviceOutOfMemoryException.class)
                            .hasMessageContaining("max-pool-size");
                });
    }

    @Test
    void aSmallCapAloneStartsTheDefaultsThatWouldPassItFollowIt() {
        runner.withPropertyValues("compute.memory.pooling.max-pool-size=128MB", "compute.memory.pinning.max-pinned-size=8MB")
                .run(context -> {
                    assertThat(context).hasNotFailed();
                    context.getBean(UnifiedMemoryManager.class).allocate(100L << 20).close();
                });
    }

    @Test
    void openClPropertiesAndTheDeviceIndexReachTheBackendProvider() {
        runner.withPropertyValues("compute.backend=" + UnattachedDeviceBackendProvider.NAME, "compute.device=2",
                "compute.opencl.platform=Portable Computing Language", "compute.opencl.device-type=cpu",
                "compute.memory.pinning.staging-buffer-size=4MB")
                .run(context -> {
                    assertThat(context).hasFailed();
                    BackendSettings probed = UnattachedDeviceBackendProvider.lastProbed();
                    assertThat(probed).isNotNull();
                    assertThat(probed.deviceIndex()).isEqualTo(2);
                    assertThat(probed.stagingBufferBytes()).isEqualTo(4L << 20);
                    assertThat(probed.options()).isEqualTo(Map.of("platform", "Portable Computing Language", "device-type", "cpu"));
                });
    }

    @Test
    void anUnavailableBackendStopsStartUpWithTheProvidersReasonAndWhatToChange() {
        runner.withPropertyValues("compute.backend=" + UnattachedDeviceBackendProvider.NAME).run(context -> {
            assertThat(context).getFailure().hasRootCauseInstanceOf(BackendUnavailableException.class);
            FailureAnalysis analysis = new BackendUnavailableFailureAnalyzer().analyze(context.getStartupFailure());
            assertThat(analysis).isNotNull();
            assertThat(analysis.getDescription()).contains("'" + UnattachedDeviceBackendProvider.NAME + "'")
                    .contains(UnattachedDeviceBackendProvider.REASON).contains("cpu");
            assertThat(analysis.getAction()).contains("compute.backend").contains("auto");
        });
    }

    /** Under auto the CPU backend on the class path refuses a device index above 0: the advice is not to add it. */
    @Test
    void noBackendAtTheDeviceIndexIsNotAdvisedToAddTheCpuBackendItHas() {
        runner.withPropertyValues("compute.device=3").run(context -> {
            assertThat(context).getFailure().hasRootCauseInstanceOf(BackendUnavailableException.class);
            FailureAnalysis analysis = new BackendUnavailableFailureAnalyzer().analyze(context.getStartupFailure());
            assertThat(analysis).isNotNull();
            assertThat(analysis.getDescription()).contains("cpu=the CPU backend has one device, index 0; compute.device is 3");
            assertThat(analysis.getAction()).doesNotContain("Add the compute-cpu module").contains("compute.device");
        });
    }

    /** A named backend refusing device 3: the advice to take auto does not promise the CPU backend runs there. */
    @Test
    void aNamedBackendRefusingTheDeviceIndexIsNotToldTheCpuBackendAlwaysRuns() {
        runner.withPropertyValues("compute.backend=cpu", "compute.device=3").run(context -> {
            FailureAnalysis analysis = new BackendUnavailableFailureAnalyzer().analyze(context.getStartupFailure());
            assertThat(analysis).isNotNull();
            assertThat(analysis.getAction()).contains("Set compute.backend to auto").contains("the CPU backend can, at compute.device 0")
                    .doesNotContain("always");
        });
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
            "compute.backend=tpu                                | compute.backend                           | tpu                | one of auto, ",
            "compute.backend=                                   | compute.backend                           | ''                 | name a backend",
            "compute.device=-1                                  | compute.device                            | -1                 | a device index of 0 or more",
            "compute.opencl.device-type=tpu                     | compute.opencl.device-type                | tpu                | one of gpu, cpu, accelerator, all",
            "compute.memory.default-location=pinned;compute.memory.pinning.enabled=false | compute.memory.default-location | PINNED | a location this backend (cpu) offers: auto or one of [DEVICE, HOST, UNIFIED]",
            "compute.memory.pooling.max-pool-size=-1GB          | compute.memory.pooling.max-pool-size      | -1073741824 bytes  | a positive size",
            "compute.memory.pooling.max-pool-size=0             | compute.memory.pooling.max-pool-size      | 0 bytes            | a positive size",
            "compute.memory.pooling.release-threshold=-1MB      | compute.memory.pooling.release-threshold  | -1048576 bytes     | a size of 0 or more",
            "compute.memory.pooling.release-threshold=8GB       | compute.memory.pooling.release-threshold  | 8589934592 bytes   | at most compute.memory.pooling.max-pool-size (4294967296 bytes)",
            "compute.memory.pooling.max-pool-size=128MB;compute.memory.pooling.release-threshold=256MB | compute.memory.pooling.release-threshold | 268435456 bytes | at most compute.memory.pooling.max-pool-size (134217728 bytes)",
            "compute.memory.pooling.trim-interval=-5s           | compute.memory.pooling.trim-interval      | PT-5S              | 0 (off) or a duration of at least 1ms",
            "compute.memory.pooling.trim-interval=500us         | compute.memory.pooling.trim-interval      | PT0.0005S          | 0 (off) or a duration of at least 1ms",
            "compute.memory.pooling.compaction-interval=-1m     | compute.memory.pooling.compaction-interval | PT-1M             | 0 (off) or a duration of at least 1ms",
            "compute.memory.pinning.staging-buffer-size=0       | compute.memory.pinning.staging-buffer-size| 0 bytes            | a positive size",
            "compute.memory.pinning.max-pinned-size=-1MB        | compute.memory.pinning.max-pinned-size    | -1048576 bytes     | a positive size",
            "compute.memory.timeline.capacity=0                 | compute.memory.timeline.capacity          | 0                  | a number of samples from 1 to 86400",
            "compute.memory.timeline.capacity=10000000          | compute.memory.timeline.capacity          | 10000000           | a number of samples from 1 to 86400",
            "compute.memory.timeline.interval=-1s               | compute.memory.timeline.interval          | PT-1S              | 0 (off) or a duration of at least 1ms",
            "compute.memory.close-timeout=-1s                   | compute.memory.close-timeout              | PT-1S              | 0 (no wait) or a positive duration",
            "compute.memory.device-wait-timeout=0s              | compute.memory.device-wait-timeout        | PT0S               | a duration of at least 1ms",
            "compute.memory.close-timeout=400000d               | compute.memory.close-timeout              | PT9600000H         | 0 (no wait) or a positive duration of at most 365d",
            "compute.health.fragmentation-warning-threshold=1.5 | compute.health.fragmentation-warning-threshold | 1.5           | a fraction between 0 and 1",
            "compute.health.device-memory-warning-threshold=-0.1| compute.health.device-memory-warning-threshold | -0.1          | a fraction between 0 and 1",
            "compute.health.cap-warning-threshold=2             | compute.health.cap-warning-threshold      | 2.0                | a fraction between 0 and 1",
            "compute.memory.out-of-memory-retries=101           | compute.memory.out-of-memory-retries      | 101                | a number of retries from 0 (handlers off) to 100",
            "compute.backend=cpu;compute.backend-options.streams=4 | compute.backend-options.streams        | 4                  | an option the cpu backend reads: page-size, pinned-fallback",
            "compute.scopes.budget-header=                      | compute.scopes.budget-header              | ''                 | the name of an HTTP header",
            "compute.scopes.budget-header=X Compute Budget      | compute.scopes.budget-header              | X Compute Budget   | the name of an HTTP header",
    })
    void everyInvalidValueStopsStartUpNamingThePropertyTheValueAndWhatIsAllowed(String settings, String property, String value, String allowed) {
        AtomicReference<Environment> environment = new AtomicReference<>();
        runner.withPropertyValues(settings.split(";")).withInitializer(context -> environment.set(context.getEnvironment())).run(context -> {
            assertThat(context).hasFailed();
            assertThat(context).getFailure().rootCause().isInstanceOf(InvalidSettingException.class)
                    .extracting(e -> ((InvalidSettingException) e).property()).isEqualTo(property);
            FailureAnalysis analysis = new InvalidSettingFailureAnalyzer(environment.get()).analyze(context.getStartupFailure());
            assertThat(analysis).isNotNull();
            assertThat(analysis.getDescription()).contains("Property: " + property).contains("Value: \"" + value + "\"")
                    .contains("Allowed: " + allowed);
            assertThat(analysis.getAction()).startsWith("Change " + property + " to ");
            assertThat(new ComputeBindFailureAnalyzer(null).analyze(context.getStartupFailure()))
                    .as("a value that converted but broke a rule is not a bind failure").isNull();
        });
    }

    /** Values Spring cannot convert: our analyzer, not Boot's generic bind report, says what the type allows. */
    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
            "compute.memory.leak-detection=verbose              | one of disabled, simple, paranoid",
            "compute.memory.default-location=gpu                | one of auto, device, host, pinned, unified",
            "compute.device=first                               | a whole number",
            "compute.memory.timeline.capacity=lots              | a whole number",
            "compute.memory.pooling.enabled=maybe               | true or false",
            "compute.memory.pooling.expandable-segments=perhaps | true or false",
            "compute.memory.pooling.compact-on-out-of-memory=if-needed | true or false",
            "compute.memory.pinning.enabled=sometimes           | true or false",
            "compute.memory.pooling.max-pool-size=4XB           | a size: a whole number with a unit B, KB, MB, GB or TB",
            "compute.memory.pooling.release-threshold=half      | a size: a whole number with a unit B, KB, MB, GB or TB",
            "compute.memory.pinning.max-pinned-size=2gigabytes  | a size: a whole number with a unit B, KB, MB, GB or TB",
            "compute.memory.pinning.staging-buffer-size=big     | a size: a whole number with a unit B, KB, MB, GB or TB",
            "compute.memory.pooling.trim-interval=hourly        | a duration: a whole number with a unit ns, us, ms, s, m, h or d",
            "compute.memory.timeline.interval=5 sec             | a duration: a whole number with a unit ns, us, ms, s, m, h or d",
            "compute.health.fragmentation-warning-threshold=high| a number, such as 0.5",
            // a value of the allowed form too large to count: the report says so, rather than allow what it refuses
            "compute.memory.pooling.release-threshold=99999999999TB | a size: a whole number with a unit B, KB, MB, GB or TB, such as 512MB or 4GB"
                    + " (a bare number is bytes), at most 8388607TB (99999999999TB is too large to count)",
            "compute.memory.pooling.max-pool-size=99999999999TB | a size: a whole number with a unit B, KB, MB, GB or TB, such as 512MB or 4GB"
                    + " (a bare number is bytes), or a share of the device's memory, such as 80%, at most 8388607TB (99999999999TB is too large to count)",
            "compute.budgets.tenant-a.limit=99999999999TB       | a size: a whole number with a unit B, KB, MB, GB or TB, such as 512MB or 4GB"
                    + " (a bare number is bytes), at most 8388607TB (99999999999TB is too large to count)",
            "compute.memory.close-timeout=999999999999999999d   | a duration: a whole number with a unit ns, us, ms, s, m, h or d, such as 500ms, 30s or 5m"
                    + " (a bare number is milliseconds), at most 106751991167300d (999999999999999999d is too large to count)",
            "compute.device=99999999999                         | a whole number, such as 0 or 720, from -2147483648 to 2147483647 (99999999999 is too large to count)",
    })
    void aValueThatDoesNotConvertIsReportedWithTheValuesItsTypeAllows(String setting, String allowed) {
        String property = setting.substring(0, setting.indexOf('='));
        String value = setting.substring(setting.indexOf('=') + 1);
        runner.withPropertyValues(setting).run(context -> {
            assertThat(context).hasFailed();
            FailureAnalysis analysis = new ComputeBindFailureAnalyzer(null).analyze(context.getStartupFailure());
            assertThat(analysis).isNotNull();
            assertThat(analysis.getDescription()).startsWith("A compute memory setting is invalid:")
                    .contains("Property: " + property).contains("Value: \"" + value + "\"").contains("Allowed: " + allowed);
            assertThat(analysis.getAction()).startsWith("Change " + property + " to " + allowed);
        });
    }

    /** A whole number with letters after it is no number at all: not one too large to count. */
    @ParameterizedTest
    @ValueSource(strings = {"compute.device=1st", "compute.memory.timeline.capacity=12k"})
    void aWholeNumberWithLettersAfterItIsNotCalledTooLarge(String setting) {
        runner.withPropertyValues(setting).run(context -> {
            assertThat(context).hasFailed();
            FailureAnalysis analysis = new ComputeBindFailureAnalyzer(null).analyze(context.getStartupFailure());
            assertThat(analysis).isNotNull();
            assertThat(analysis.getDescription()).contains("Allowed: a whole number, such as 0 or 720\n").doesNotContain("too large");
        });
    }

    @Test
    void aStatusOnWarningIsABootStatusCodeWhateverItsCase() {
        runner.withPropertyValues("compute.health.status-on-warning=out-of-service")
                .run(context -> assertThat(context.getBean(ComputeProperties.class).health().statusOnWarning()).isEqualTo("OUT_OF_SERVICE"));
    }

    @Test
    void aManagerOfTheUsersOwnReplacesOursAndIsClosedWithTheContext() {
        runner.withUserConfiguration(OwnManager.class).run(context -> {
            assertThat(context).hasSingleBean(UnifiedMemoryManager.class);
            assertThat(context.getBean(UnifiedMemoryManager.class).backendInfo().backend()).isEqualTo("simulated");
        });
        assertThat(OwnManager.backend.isClosed()).isTrue();
    }

    @Test
    void shutdownClosesTheManagerAndFreesBuffersLeftOpen() {
        UnifiedMemoryManager[] seen = new UnifiedMemoryManager[1];
        UnifiedBuffer[] leftOpen = new UnifiedBuffer[1];
        runner.run(context -> {
            seen[0] = context.getBean(UnifiedMemoryManager.class);
            leftOpen[0] = seen[0].allocate(1 << 20);
            assertThat(seen[0].liveBuffers()).hasSize(1);
        });
        assertThat(seen[0].isClosed()).isTrue();
        assertThatThrownBy(() -> leftOpen[0].copyFrom(new byte[16])).isInstanceOf(IllegalStateException.class);
    }

    @Configuration(proxyBeanMethods = false)
    static class OwnManager {
        static final SimulatedDiscreteBackend backend = new SimulatedDiscreteBackend();

        @Bean
        UnifiedMemoryManager ownManager() {
            return UnifiedMemoryManager.builder().backend(backend).build();
        }
    }
}
