package dev.compute.memory.contract;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.testing.ChildJvm;
import java.time.Duration;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The scenarios of {@link MappedFileScenarios} on one backend, each in a JVM of its own: the child must end normally,
 * having checked that the rule held. A crash (a write into a read-only mapping, a read of an unmapped or truncated
 * one) shows here as a failed test, not a lost test run. A backend module subclasses this and names its backend.
 */
public abstract class MappedFileSafetyContractTest {

    /** The name the child builds its manager by: a provider's name, or {@code simulated}. */
    protected abstract String backend();

    /** Skips (with JUnit's {@code Assumptions} and the reason) where the backend cannot run here. */
    protected void assumeBackend() {}

    @ParameterizedTest
    @ValueSource(strings = {
            "readOnlyMappingRefusesEveryWrite",
            "closedWhileAnotherThreadReadsThroughAView",
            "managerClosedWhileAnotherThreadReadsThroughAView",
            "sharedViewEndsWithTheBufferWhileAnotherThreadReads",
            "truncatedWhileMapped",
            "copiesThroughTheMappingsOwnViewsAfterTruncation",
            "truncatedThenDeletedOrReplaced",
            "compiledCopiesOfATruncatedFile",
            "namedPipesAreRefusedBeforeTheyAreOpened"})
    void theRuleHoldsAndTheJvmSurvives(String scenario) throws Exception {
        assumeBackend();
        ChildJvm.Result result = ChildJvm.run(Duration.ofSeconds(120), MappedFileScenarios.class, backend(), scenario);
        assertThat(result.crashed()).as(result.describe()).isFalse();
        assertThat(result.exitCode()).as(result.describe()).isZero();
        assertThat(result.output()).as(result.describe()).contains("OK " + scenario);
    }
}
