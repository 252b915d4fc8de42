package dev.compute.boot.test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.InvalidSettingException;
import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.WarmupBlocks;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.platform.engine.TestExecutionResult;
import org.junit.platform.engine.discovery.DiscoverySelectors;
import org.junit.platform.testkit.engine.EngineTestKit;
import org.junit.platform.testkit.engine.Event;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.context.ApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Fallback;
import org.springframework.context.annotation.Primary;
import org.springframework.core.NestedExceptionUtils;
import org.springframework.test.context.NestedTestConfiguration;

/**
 * The test's manager, whatever the application's own settings say. Each test context here is given the settings of
 * a production service on a GPU (an OpenCL backend, caps and a release threshold of gigabytes, a 512MB warm-up, the
 * README's own example) and, where it says so, named managers: none of it reaches the test's manager.
 */
class AutoConfigureComputeMemoryTests {

    /** A context without auto-configuration, as a slice test's is: the annotation alone brings the manager. */
    @Nested
    @SpringBootTest(classes = NoAutoConfiguration.class, properties = {"compute.backend=opencl", "compute.memory.pooling.max-pool-size=8GB",
            "compute.memory.pooling.release-threshold=1GB", "compute.memory.pooling.warmup.device[0].size=512MB",
            "compute.memory.pinning.max-pinned-size=2GB", "compute.memory.pinning.staging-buffer-size=256MB",
            "compute.memory.leak-detection=simple"})
    @AutoConfigureComputeMemory
    class InASliceWithProductionSettings {

        @Autowired
        UnifiedMemoryManager manager;

        @Test
        void theManagerIsOnTheCpuWithoutTheProductionWarmup() {
            assertThat(manager.backendInfo().backend()).isEqualTo("cpu");
            assertThat(manager.settings().warmup()).as("compute.memory.pooling.warmup is production's, not the test's").isEmpty();
            assertThat(manager.settings().releaseThreshold()).isEqualTo(16L << 20);
        }

        @Test
        void everyBufferHasItsAllocationSite() {
            try (UnifiedBuffer buffer = manager.allocate(4096)) {
                assertThat(manager.liveBuffers()).singleElement().satisfies(live -> assertThat(live.allocationSite())
                        .contains("AutoConfigureComputeMemoryTests$InASliceWithProductionSettings.everyBufferHasItsAllocationSite"));
            }
        }

        @Test
        void thePoolIsSmallSoARunawayAllocationFailsAtOnce() {
            assertThatThrownBy(() -> manager.allocate(65L << 20)).isInstanceOf(DeviceOutOfMemoryException.class)
                    .hasMessageContaining("above compute.memory.pooling.max-pool-size (67108864 bytes)");
        }
    }

    /**
     * A {@code @Nested} class inherits its enclosing class's test configuration, and Spring Boot maps the enclosing
     * class's annotation attributes after the nested class's own (its {@code AnnotationsPropertySource}), so those win:
     * a nested {@code @AutoConfigureComputeMemory(maxPoolSize = "16MB")} ran on the outer 32MB. With
     * {@code @NestedTestConfiguration(OVERRIDE)} and a {@code @SpringBootTest} of its own, its own attributes apply.
     */
    @Nested
    @SpringBootTest(classes = NoAutoConfiguration.class)
    @AutoConfigureComputeMemory(maxPoolSize = "32MB")
    class OuterOfANestedClassWithAttributesOfItsOwn {

        @Autowired
        UnifiedMemoryManager manager;

        @Test
        void theOuterCap() {
            assertThat(manager.settings().maxPoolSize()).isEqualTo(32L << 20);
        }

        @Nested
        @AutoConfigureComputeMemory(maxPoolSize = "16MB")
        class Inheriting {

            @Autowired
            UnifiedMemoryManager manager;

            @Test
            void theOuterAttributesWin() {
                assertThat(manager.settings().maxPoolSize()).isEqualTo(32L << 20);
            }
        }

        @Nested
        @NestedTestConfiguration(NestedTestConfiguration.EnclosingConfiguration.OVERRIDE)
        @SpringBootTest(classes = NoAutoConfiguration.class)
        @AutoConfigureComputeMemory(maxPoolSize = "16MB")
        class Overriding {

            @Autowired
            UnifiedMemoryManager manager;

            @Test
            void itsOwnAttributesApply() {
                assertThat(manager.settings().maxPoolSize()).isEqualTo(16L << 20);
            }
        }
    }

    /** Settings of the test's own choosing: the annotation's attributes, then spring.test.compute.* for any other key. */
    @Nested
    @SpringBootTest(classes = NoAutoConfiguration.class, properties = {"compute.memory.pooling.warmup.device[0].size=512MB",
            "spring.test.compute.memory.pooling.warmup.host[0].size=1MB", "spring.test.compute.memory.pooling.warmup.host[0].count=2"})
    @AutoConfigureComputeMemory(maxPoolSize = "128MB", leakDetection = LeakDetectionLevel.SIMPLE)
    class WithSettingsOfItsOwn {

        @Autowired
        UnifiedMemoryManager manager;

        @Test
        void theTestsSettingsAreTheOnlyOnes() {
            assertThat(manager.settings().maxPoolSize()).isEqualTo(128L << 20);
            assertThat(manager.settings().leakDetection()).isEqualTo(LeakDetectionLevel.SIMPLE);
            assertThat(manager.settings().warmup()).isEqualTo(Map.of(MemoryLocation.HOST, List.of(new WarmupBlocks(1L << 20, 2))));
        }
    }

    /**
     * spring.test.compute.* in the test's properties (as a src/test application.yml shared by every test class would
     * set it) for a key that an attribute maps: the attribute's default overrode it, so it was silently ignored. An
     * attribute left at its default now maps nothing, and its default sits below every property source; one set on
     * the annotation still wins.
     */
    @Nested
    @SpringBootTest(classes = NoAutoConfiguration.class, properties = {"spring.test.compute.memory.pooling.max-pool-size=32MB",
            "spring.test.compute.memory.leak-detection=simple", "spring.test.compute.backend=simulated",
            "spring.test.compute.memory.pinning.staging-buffer-size=8MB"})
    @AutoConfigureComputeMemory(stagingBufferSize = "2MB")
    class WithTheTestsPropertiesForTheAttributesKeys {

        @Autowired
        UnifiedMemoryManager manager;

        @Test
        void thePropertiesApplyWhereTheAttributesAreLeftAtTheirDefaults() {
            assertThat(manager.settings().maxPoolSize()).isEqualTo(32L << 20);
            assertThat(manager.settings().leakDetection()).isEqualTo(LeakDetectionLevel.SIMPLE);
            assertThat(manager.backendInfo().backend()).isEqualTo("simulated");
            assertThat(manager.settings().releaseThreshold()).as("an attribute's default, its key set nowhere").isEqualTo(16L << 20);
            assertThat(manager.settings().stagingBufferSize()).as("an attribute set on the annotation").isEqualTo(2L << 20);
        }
    }

    /** compute.managers names two managers: each is replaced, keeping its name, qualifier and primary flag. */
    @Nested
    @SpringBootTest(classes = NoAutoConfiguration.class, properties = {"compute.managers.gpu.backend=opencl",
            "compute.managers.gpu.memory.pooling.warmup.device[0].size=512MB", "compute.managers.cpu.backend=cpu", "compute.primary=gpu"})
    @AutoConfigureComputeMemory
    class WithNamedManagers {

        @Autowired
        ApplicationContext context;

        @Autowired
        @Qualifier("cpu")
        UnifiedMemoryManager cpu;

        @Autowired
        UnifiedMemoryManager primary;

        @Test
        void eachNamedManagerIsATestManagerUnderItsOwnNameAndQualifier() {
            assertThat(context.getBeansOfType(UnifiedMemoryManager.class)).containsOnlyKeys("gpuUnifiedMemoryManager", "cpuUnifiedMemoryManager")
                    .allSatisfy((name, manager) -> {
                        assertThat(manager.backendInfo().backend()).isEqualTo("cpu");
                        assertThat(manager.settings().warmup()).isEmpty();
                        assertThat(manager.settings().maxPoolSize()).isEqualTo(64L << 20);
                    });
            assertThat(primary).isSameAs(context.getBean("gpuUnifiedMemoryManager")).isNotSameAs(cpu);
            assertThat(cpu).isSameAs(context.getBean("cpuUnifiedMemoryManager"));
        }
    }

    /** An application's own manager bean, qualified: replaced too under Replace.ANY, kept under AUTO_CONFIGURED. */
    @Nested
    @SpringBootTest(classes = OwnManager.class)
    @AutoConfigureComputeMemory
    class ReplacingAnyManager {

        @Autowired
        @Qualifier("mine")
        UnifiedMemoryManager manager;

        @Test
        void theApplicationsOwnManagerIsATestManagerWithItsQualifier() {
            assertThat(manager.settings().maxPoolSize()).isEqualTo(64L << 20);
            assertThat(manager.settings().leakDetection()).isEqualTo(LeakDetectionLevel.PARANOID);
        }
    }

    /** An application's managers told apart by a qualifier annotation of its own: each test manager keeps it. */
    @Nested
    @SpringBootTest(classes = OwnManagersByQualifierAnnotation.class)
    @AutoConfigureComputeMemory
    class ReplacingManagersQualifiedByAnAnnotationOfTheApplications {

        @Autowired
        @Accelerator
        UnifiedMemoryManager accelerator;

        @Autowired
        UnifiedMemoryManager primary;

        @Test
        void eachKeepsItsQualifier() {
            assertThat(accelerator).isNotSameAs(primary);
            assertThat(accelerator.settings().maxPoolSize()).isEqualTo(64L << 20);
        }
    }

    /** An application's managers told apart by @Fallback and by one that is no default candidate: each test manager is the same. */
    @Nested
    @SpringBootTest(classes = OwnManagersByCandidacy.class)
    @AutoConfigureComputeMemory
    class ReplacingManagersThatAreFallbacksOrNoDefaultCandidates {

        @Autowired
        ApplicationContext context;

        @Autowired
        UnifiedMemoryManager injected;

        @Test
        void eachKeepsHowItIsInjected() {
            assertThat(injected).isSameAs(context.getBean("main"));
            assertThat(context.getBeansOfType(UnifiedMemoryManager.class)).containsOnlyKeys("main", "spare", "special")
                    .allSatisfy((name, manager) -> assertThat(manager.settings().maxPoolSize()).isEqualTo(64L << 20));
        }
    }

    @Nested
    @SpringBootTest(classes = OwnManager.class)
    @AutoConfigureComputeMemory(replace = AutoConfigureComputeMemory.Replace.AUTO_CONFIGURED)
    class ReplacingOnlyTheStartersManagers {

        @Autowired
        UnifiedMemoryManager manager;

        @Test
        void theApplicationsOwnManagerIsKept() {
            assertThat(manager.settings().maxPoolSize()).isEqualTo(OwnManager.MAX_POOL_SIZE);
        }
    }

    /** Replace.NONE: the application's manager with the application's settings; the annotation only imports it. */
    @Nested
    @SpringBootTest(classes = NoAutoConfiguration.class, properties = {"compute.backend=cpu", "compute.memory.pooling.max-pool-size=256MB",
            "compute.memory.leak-detection=simple"})
    @AutoConfigureComputeMemory(replace = AutoConfigureComputeMemory.Replace.NONE)
    class ReplacingNone {

        @Autowired
        UnifiedMemoryManager manager;

        @Test
        void theManagerHasTheApplicationsSettings() {
            assertThat(manager.settings().maxPoolSize()).isEqualTo(256L << 20);
            assertThat(manager.settings().leakDetection()).isEqualTo(LeakDetectionLevel.SIMPLE);
        }
    }

    /** A bad test setting stops the context naming the test's properties and where each was set. */
    @Test
    @ExtendWith(OutputCaptureExtension.class)
    void aBadTestSettingIsReportedUnderTheTestsPropertiesWithTheirOrigins(CapturedOutput output) {
        List<Event> failed = EngineTestKit.engine("junit-jupiter").selectors(DiscoverySelectors.selectClass(WarmsUpAboveTheTestsThreshold.class))
               .execute().allEvents().failed().list();

        assertThat(failed).singleElement().satisfies(event -> assertThat(event.getRequiredPayload(TestExecutionResult.class).getThrowable())
                .get().satisfies(thrown -> assertThat(rootSetting(thrown)).satisfies(setting -> {
                    assertThat(setting.property()).isEqualTo("spring.test.compute.memory.pooling.warmup.host");
                    assertThat(setting.allowed()).startsWith("at most spring.test.compute.memory.pooling.release-threshold (16777216 bytes)");
                })));
        assertThat(output).contains("Property: spring.test.compute.memory.pooling.warmup.host\n")
                .contains("Origin: \"spring.test.compute.memory.pooling.warmup.host[0].size\" from property source \"Inlined Test Properties\"")
                .contains("Related: spring.test.compute.memory.pooling.release-threshold (\"spring.test.compute.memory.pooling.release-threshold\""
                        + " from property source \"@AutoConfigureComputeMemory defaults\")");
    }

    /**
     * A key under spring.test.compute.* that no setting has stops the context naming it, as one under compute.* stops the
     * application: a misspelt cap in a test's properties would otherwise leave the test on the default one, silently.
     */
    @Test
    @ExtendWith(OutputCaptureExtension.class)
    void aMisspeltTestSettingStopsTheContextNamingIt(CapturedOutput output) {
        List<Event> failed = EngineTestKit.engine("junit-jupiter").selectors(DiscoverySelectors.selectClass(SetsAMisspeltTestSetting.class))
                .execute().allEvents().failed().list();

        assertThat(failed).singleElement().satisfies(event -> assertThat(event.getRequiredPayload(TestExecutionResult.class).getThrowable())
                .get().satisfies(thrown -> assertThat(NestedExceptionUtils.getMostSpecificCause(thrown))
                        .hasMessageContaining("spring.test.compute.memory.pooling.max-pol-size")));
        assertThat(output).contains("Property: spring.test.compute.memory.pooling.max-pol-size\n")
                .contains("Origin: \"spring.test.compute.memory.pooling.max-pol-size\" from property source \"Inlined Test Properties\"");
    }

    private static InvalidSettingException rootSetting(Throwable thrown) {
        for (Throwable cause = thrown; cause != null; cause = cause.getCause()) {
            if (cause instanceof InvalidSettingException setting) {
                return setting;
            }
        }
        throw new AssertionError("no InvalidSettingException in", thrown);
    }

    /** Run by the test above only (Surefire leaves a static nested class without @Nested alone). */
    @SpringBootTest(classes = NoAutoConfiguration.class, properties = "spring.test.compute.memory.pooling.warmup.host[0].size=32MB")
    @AutoConfigureComputeMemory
    static class WarmsUpAboveTheTestsThreshold {

        @Test
        void starts() {}
    }

    /** Run by the test above only; its attributes' key (replace) and its budgets are keys the test manager has. */
    @SpringBootTest(classes = NoAutoConfiguration.class, properties = {"spring.test.compute.memory.pooling.max-pol-size=1GB",
            "spring.test.compute.budgets.search.limit=1MB"})
    @AutoConfigureComputeMemory(replace = AutoConfigureComputeMemory.Replace.AUTO_CONFIGURED)
    static class SetsAMisspeltTestSetting {

        @Test
        void starts() {}
    }

    @Configuration(proxyBeanMethods = false)
    static class NoAutoConfiguration {}

    @Target({ElementType.FIELD, ElementType.METHOD, ElementType.PARAMETER})
    @Retention(RetentionPolicy.RUNTIME)
    @Qualifier
    @interface Accelerator {}

    @Configuration(proxyBeanMethods = false)
    static class OwnManagersByCandidacy {

        @Bean(destroyMethod = "close")
        UnifiedMemoryManager main() {
            return UnifiedMemoryManager.builder().backend("cpu").build();
        }

        @Bean(destroyMethod = "close")
        @Fallback
        UnifiedMemoryManager spare() {
            return UnifiedMemoryManager.builder().backend("cpu").build();
        }

        @Bean(destroyMethod = "close", defaultCandidate = false)
        UnifiedMemoryManager special() {
            return UnifiedMemoryManager.builder().backend("cpu").build();
        }
    }

    @Configuration(proxyBeanMethods = false)
    static class OwnManagersByQualifierAnnotation {

        @Bean(destroyMethod = "close")
        @Primary
        UnifiedMemoryManager host() {
            return UnifiedMemoryManager.builder().backend("cpu").build();
        }

        @Bean(destroyMethod = "close")
        @Accelerator
        UnifiedMemoryManager accelerator() {
            return UnifiedMemoryManager.builder().backend("cpu").build();
        }
    }

    @Configuration(proxyBeanMethods = false)
    static class OwnManager {

        static final long MAX_POOL_SIZE = 96L << 20;

        @Bean(destroyMethod = "close")
        @Qualifier("mine")
        UnifiedMemoryManager mine() {
            return UnifiedMemoryManager.builder().backend("cpu").maxPoolSize(MAX_POOL_SIZE).build();
        }
    }
}
