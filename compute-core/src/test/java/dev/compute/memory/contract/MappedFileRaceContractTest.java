package dev.compute.memory.contract;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.testing.ChildJvm;
import java.time.Duration;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The scenarios of {@link MappedFileRaceScenarios} that depend on the backend, each in a JVM of its own: segments
 * over a mapping in more forms (slices of views, shared and device accesses, other managers' mappings), after the
 * file was truncated;
 * they guard the promise that no such copy ends the process or fails with a raw {@link InternalError}.
 */
public abstract class MappedFileRaceContractTest {

    protected abstract String backend();

    protected void assumeBackend() {}

    @ParameterizedTest
    @ValueSource(strings = {"compiledCopiesThroughViewsOpsAndOtherMappings", "accessesAndOtherManagersMappingsAfterTruncation"})
    void theRuleHoldsAndTheJvmSurvives(String scenario) throws Exception {
        assumeBackend();
        ChildJvm.Result result = ChildJvm.run(Duration.ofSeconds(180), MappedFileRaceScenarios.class, backend(), scenario);
        assertThat(result.crashed()).as(result.describe()).isFalse();
        assertThat(result.exitCode()).as(result.describe()).isZero();
        assertThat(result.output()).as(result.describe()).contains("OK " + scenario);
    }
}
