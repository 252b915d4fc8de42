package dev.compute.memory.cpu;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.testing.ChildJvm;
import java.time.Duration;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Each way a user could once reach freed memory ({@link LifetimeScenarios}), run in a JVM of its own: the child must
 * end normally, having checked that the rule held. A crash shows here as a failed test, not a lost test run.
 */
class LifetimeRuleInChildJvmTest {

    @ParameterizedTest
    @ValueSource(strings = {
            "staleViewAfterCloseAndTrim",
            "viewClosedElsewhereThenTrimmed",
            "managerClosedUnderAWritingView",
            "managerClosedUnderASharedWritingView",
            "managerClosedUnderAViewThatCallsBack",
            "managerClosedUnderANativeCall",
            "opsAndCopiesRaceCloseAndTrim",
            "leakedBufferWithALiveView",
            "pagesHeldByAnIdleViewGoBack"})
    void theRuleHoldsAndTheJvmSurvives(String scenario) throws Exception {
        ChildJvm.Result result = ChildJvm.run(Duration.ofSeconds(90), LifetimeScenarios.class, scenario);
        assertThat(result.crashed()).as(result.describe()).isFalse();
        assertThat(result.exitCode()).as(result.describe()).isZero();
        assertThat(result.output()).as(result.describe()).contains("OK " + scenario);
    }
}
