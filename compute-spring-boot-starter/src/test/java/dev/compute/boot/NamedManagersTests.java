package dev.compute.boot;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.boot.diagnostics.ComputeBindFailureAnalyzer;
import dev.compute.boot.diagnostics.InvalidSettingFailureAnalyzer;
import dev.compute.memory.InvalidSettingException;
import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.UnifiedMemoryManager;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.diagnostics.FailureAnalysis;
import org.springframework.boot.env.YamlPropertySourceLoader;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Primary;
import org.springframework.core.NestedExceptionUtils;
import org.springframework.core.env.Environment;
import org.springframework.core.io.ByteArrayResource;

/** Several managers from compute.managers.<name>.*: their beans, what each inherits, the primary, and what stops start-up. */
class NamedManagersTests {

    private final ApplicationContextRunner runner = new ApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(ComputeMemoryAutoConfiguration.class))
            .withPropertyValues("compute.memory.timeline.interval=0");

    @Test
    void eachNameIsAManagerBeanWithItsOwnSettingsAndTheRestInherited() {
        runner.withPropertyValues("compute.memory.leak-detection=paranoid", "compute.memory.pooling.max-pool-size=1GB",
                "compute.managers.big.backend=cpu", "compute.managers.big.memory.pooling.max-pool-size=2GB",
                "compute.managers.small.memory.pooling.max-pool-size=64MB", "compute.managers.small.memory.leak-detection=disabled")
                .withUserConfiguration(Injected.class).run(context -> {
                    assertThat(context).getBeans(UnifiedMemoryManager.class).containsOnlyKeys("bigUnifiedMemoryManager", "smallUnifiedMemoryManager");
                    UnifiedMemoryManager big = context.getBean("bigUnifiedMemoryManager", UnifiedMemoryManager.class);
                    UnifiedMemoryManager small = context.getBean("smallUnifiedMemoryManager", UnifiedMemoryManager.class);
                    assertThat(big.settings().maxPoolSize()).isEqualTo(2L << 30);
                    assertThat(big.settings().leakDetection()).as("inherited").isEqualTo(LeakDetectionLevel.PARANOID);
                    assertThat(small.settings().maxPoolSize()).isEqualTo(64L << 20);
                    assertThat(small.settings().releaseThreshold()).as("the default follows its own cap").isEqualTo(64L << 20);
                    assertThat(small.settings().leakDetection()).isEqualTo(LeakDetectionLevel.DISABLED);
                    assertThat(context.getBean(UnifiedMemoryManager.class)).as("the first is primary").isSameAs(big);
                    assertThat(context.getBean(Injected.class).small).as("qualified by its name").isSameAs(small);
                });
    }

    @Test
    void eachNameIsQualifiedByItAndComputePrimaryChoosesThePrimary() {
        runner.withPropertyValues("compute.managers.big.backend=cpu", "compute.managers.small.backend=cpu", "compute.primary=small")
                .withUserConfiguration(Injected.class).run(context -> {
                    UnifiedMemoryManager small = context.getBean("smallUnifiedMemoryManager", UnifiedMemoryManager.class);
                    assertThat(context.getBean(UnifiedMemoryManager.class)).isSameAs(small);
                    assertThat(context.getBean(Injected.class).small).isSameAs(small);
                });
    }

    /**
     * The first manager is the first in the application's configuration, whatever overrides one's setting from a source
     * that comes before it (an environment variable, a profile's file, a command-line argument).
     */
    @Test
    void theFirstIsTheFirstConfiguredWhenAnotherManagersSettingIsOverriddenFromAnEarlierSource() {
        String yaml = """
                compute:
                  managers:
                    cpu:
                      backend: cpu
                    gpu:
                      backend: cpu
                """;
        runner.withInitializer(context -> {
            try {
                new YamlPropertySourceLoader().load("application.yml", new ByteArrayResource(yaml.getBytes(StandardCharsets.UTF_8)))
                        .forEach(context.getEnvironment().getPropertySources()::addLast);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }).withPropertyValues("compute.managers.gpu.memory.leak-detection=paranoid").run(context -> {
            assertThat(context.getBean("gpuUnifiedMemoryManager", UnifiedMemoryManager.class).settings().leakDetection())
                    .isEqualTo(LeakDetectionLevel.PARANOID);
            assertThat(context.getBean(UnifiedMemoryManager.class)).isSameAs(context.getBean("cpuUnifiedMemoryManager"));
        });
    }

    @Test
    void aManagerOfTheApplicationsOwnStandsBesideTheNamedOnes() {
        runner.withPropertyValues("compute.managers.big.backend=cpu").withUserConfiguration(OwnManager.class).run(context -> {
            assertThat(context).getBeans(UnifiedMemoryManager.class).containsOnlyKeys("bigUnifiedMemoryManager", "ownManager");
            assertThat(context.getBean(UnifiedMemoryManager.class)).isSameAs(context.getBean("bigUnifiedMemoryManager"));
        });
    }

    /**
     * An application's own {@code @Primary} manager stays the one injected where compute.primary is unset (the first named
     * manager is primary only by default). Before, both were primary and the context failed at the first injection
     * ("more than one 'primary' bean found"). Set, compute.primary is the user's word against the application's: that
     * conflict stays Spring's to report.
     */
    @Test
    void anApplicationsOwnPrimaryManagerStaysPrimaryWhereComputePrimaryIsUnset() {
        runner.withPropertyValues("compute.managers.big.backend=cpu").withUserConfiguration(OwnPrimaryManager.class).run(context -> {
            assertThat(context).hasNotFailed();
            assertThat(context.getBean(UnifiedMemoryManager.class)).isSameAs(context.getBean("ownManager"));
            assertThat(context.getBean("bigUnifiedMemoryManager")).isNotSameAs(context.getBean("ownManager"));
        });
        runner.withPropertyValues("compute.managers.big.backend=cpu", "compute.primary=big").withUserConfiguration(OwnPrimaryManager.class)
                .run(context -> assertThatThrownBy(() -> context.getBean(UnifiedMemoryManager.class))
                        .hasMessageContaining("more than one 'primary'"));
    }

    @Test
    void theManagersCloseWithTheContext() {
        AtomicReference<UnifiedMemoryManager> big = new AtomicReference<>();
        runner.withPropertyValues("compute.managers.big.backend=cpu")
                .run(context -> big.set(context.getBean(UnifiedMemoryManager.class)));
        assertThat(big.get().isClosed()).isTrue();
    }

    /** A bad value stops start-up naming the property where it was set: the named one, or the inherited one. */
    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
            "compute.managers.gpu.memory.pooling.max-pool-size=-1GB                   | compute.managers.gpu.memory.pooling.max-pool-size | -1073741824 bytes",
            "compute.memory.pooling.max-pool-size=-1GB                                | compute.memory.pooling.max-pool-size              | -1073741824 bytes",
            "compute.managers.gpu.memory.pooling.max-pool-size=128MB;compute.memory.pooling.release-threshold=256MB | compute.memory.pooling.release-threshold | 268435456 bytes",
            "compute.managers.gpu.memory.pooling.max-pool-size=128MB;compute.managers.gpu.memory.pooling.release-threshold=256MB | compute.managers.gpu.memory.pooling.release-threshold | 268435456 bytes",
            "compute.managers.gpu.backend=tpu                                         | compute.managers.gpu.backend                      | tpu",
            "compute.managers.gpu.backend-options.page-size=3                         | compute.managers.gpu.backend-options.page-size    | 3",
            "compute.managers.gpu.backend-options.streams=8                           | compute.managers.gpu.backend-options.streams      | 8",
            "compute.managers.gpu.opencl.device-type=tpu                              | compute.managers.gpu.opencl.device-type           | tpu",
            "compute.primary=tpu                                                      | compute.primary                                   | tpu",
            "compute.managers.gpu.memory.recording.max-events=0                       | compute.managers.gpu.memory.recording.max-events  | 0",
            "compute.managers.gpu.memory.recording.call-site-frames=65                | compute.managers.gpu.memory.recording.call-site-frames | 65",
    })
    void aBadSettingOfANamedManagerIsReportedWhereItWasSet(String settings, String property, String value) {
        AtomicReference<Environment> environment = new AtomicReference<>();
        runner.withPropertyValues("compute.managers.gpu.backend=cpu").withPropertyValues(settings.split(";"))
                .withInitializer(context -> environment.set(context.getEnvironment())).run(context -> {
                    assertThat(context).hasFailed();
                    FailureAnalysis analysis = new InvalidSettingFailureAnalyzer(environment.get()).analyze(context.getStartupFailure());
                    assertThat(analysis).as("%s", context.getStartupFailure()).isNotNull();
                    assertThat(analysis.getDescription()).contains("Property: " + property + "\n").contains("Value: \"" + value + "\"")
                            .contains("Origin: ");
                    assertThat(analysis.getAction()).startsWith("Change " + property + " to ");
                });
    }

    @Test
    void aNameThatCouldNotBeAPathOrATagIsRefused() {
        runner.withPropertyValues("compute.managers[gpu_0].backend=cpu").run(context -> {
            assertThat(context).hasFailed();
            assertThat(NestedExceptionUtils.getMostSpecificCause(context.getStartupFailure())).isInstanceOf(InvalidSettingException.class)
                    .hasMessageContaining("compute.managers.gpu_0").hasMessageContaining("lower-case letters, digits and dashes");
        });
    }

    /**
     * Relaxed binding keeps only the letters, digits and dashes of a name not in brackets, and takes names that differ by
     * dashes for one: g/pu started a manager gpu, and g-pu beside gpu each got the other's settings.
     */
    @Test
    void aNameTheBindingWouldChangeOrTakeForAnotherIsRefusedAsWritten() {
        runner.withPropertyValues("compute.managers.g/pu.backend=cpu").run(context -> {
            assertThat(context).hasFailed();
            assertThat(NestedExceptionUtils.getMostSpecificCause(context.getStartupFailure())).isInstanceOf(InvalidSettingException.class)
                    .hasMessageStartingWith("invalid value 'g/pu' for compute.managers.g/pu: a manager name of lower-case letters, digits and dashes")
                    .hasMessageEndingWith("Spring's binding would make it 'gpu'");
        });
        runner.withPropertyValues("compute.managers.g-pu.backend=cpu", "compute.managers.gpu.memory.pooling.max-pool-size=2MB").run(context -> {
            assertThat(context).hasFailed();
            assertThat(NestedExceptionUtils.getMostSpecificCause(context.getStartupFailure())).isInstanceOf(InvalidSettingException.class)
                    .hasMessageContaining("compute.managers.gpu").hasMessageContaining("a manager name that does not differ from compute.managers.g-pu only by dashes or case");
        });
    }

    @Test
    void aNamedValueThatDoesNotConvertIsReportedUnderItsOwnName() {
        runner.withPropertyValues("compute.managers.gpu.backend=cpu", "compute.managers.gpu.memory.leak-detection=verbose").run(context -> {
            assertThat(context).hasFailed();
            FailureAnalysis analysis = new ComputeBindFailureAnalyzer(null).analyze(context.getStartupFailure());
            assertThat(analysis).isNotNull();
            assertThat(analysis.getDescription()).contains("Property: compute.managers.gpu.memory.leak-detection")
                    .contains("Value: \"verbose\"").contains("Allowed: one of disabled, simple, paranoid");
        });
    }

    @Test
    void withoutNamedManagersComputePrimaryIsAMistake() {
        runner.withPropertyValues("compute.primary=gpu").run(context -> assertThat(context).getFailure()
                .rootCause().isInstanceOf(InvalidSettingException.class).hasMessageContaining("compute.primary"));
    }

    @Configuration(proxyBeanMethods = false)
    static class Injected {
        final UnifiedMemoryManager small;

        Injected(@Qualifier("small") UnifiedMemoryManager small) {
            this.small = small;
        }
    }

    @Configuration(proxyBeanMethods = false)
    static class OwnManager {
        @Bean(destroyMethod = "close")
        UnifiedMemoryManager ownManager() {
            return UnifiedMemoryManager.builder().backend("cpu").build();
        }
    }

    @Configuration(proxyBeanMethods = false)
    static class OwnPrimaryManager {
        @Bean(destroyMethod = "close")
        @Primary
        UnifiedMemoryManager ownManager() {
            return UnifiedMemoryManager.builder().backend("cpu").build();
        }
    }
}
