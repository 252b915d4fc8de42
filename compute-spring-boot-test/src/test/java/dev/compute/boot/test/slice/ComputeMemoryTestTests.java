package dev.compute.boot.test.slice;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.boot.test.ComputeMemoryTest;
import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import java.util.List;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.Test;
import org.junit.platform.engine.TestExecutionResult;
import org.junit.platform.engine.discovery.DiscoverySelectors;
import org.junit.platform.testkit.engine.EngineTestKit;
import org.junit.platform.testkit.engine.Event;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.context.ApplicationContext;
import org.springframework.context.annotation.Import;
import org.springframework.test.annotation.DirtiesContext;

/**
 * {@code @ComputeMemoryTest} on an application found by its {@code @SpringBootApplication}: the service imported,
 * the test's manager whatever the application's {@code compute.*} says, nothing else of the application and no
 * other auto-configuration, and a test that leaves a buffer open fails.
 */
@ComputeMemoryTest(properties = {"compute.backend=opencl", "compute.memory.pooling.warmup.host[0].size=512MB"})
@Import(Scorer.class)
class ComputeMemoryTestTests {

    @Autowired
    Scorer scorer;

    @Autowired
    UnifiedMemoryManager manager;

    @Autowired
    ApplicationContext context;

    @Test
    void theServiceRunsOnTheTestsManager() {
        assertThat(scorer.score(new float[] {1, 2}, new float[] {10, 20})).isEqualTo(33.0);
        assertThat(manager.backendInfo().backend()).isEqualTo("cpu");
        assertThat(manager.settings().leakDetection()).isEqualTo(LeakDetectionLevel.PARANOID);
        assertThat(manager.settings().warmup()).isEmpty();
    }

    @Test
    void nothingElseOfTheApplicationAndNoOtherAutoConfigurationIsThere() {
        assertThat(context.getBeanNamesForType(Unrelated.class)).isEmpty();
        assertThat(context.getBeanDefinitionNames()).noneMatch(name -> name.contains("TaskExecution") || name.contains("Jackson"));
    }

    @Test
    void aTestThatLeavesABufferOpenFails() {
        List<Event> failed = EngineTestKit.engine("junit-jupiter").selectors(DiscoverySelectors.selectClass(LeavesABufferOpen.class))
                .execute().testEvents().failed().list();
        assertThat(failed).hasSize(1);
        assertThat(failed.getFirst().getRequiredPayload(TestExecutionResult.class).getThrowable().orElseThrow())
                .hasMessageStartingWith("unifiedMemoryManager (cpu) has 1 buffer(s) of 64 bytes open that this test opened and did not close")
                .hasMessageContaining("at dev.compute.boot.test.slice.Scorer.keep(Scorer.java:");
    }

    /** Run by the test above only. */
    @ComputeMemoryTest
    @Import(Scorer.class)
    @DirtiesContext // its manager closes with the class, freeing the buffer left open
    static class LeavesABufferOpen {

        static @Nullable UnifiedBuffer kept;

        @Autowired
        Scorer scorer;

        @Test
        void keepsABuffer() {
            kept = scorer.keep(16);
        }
    }
}
