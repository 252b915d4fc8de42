package dev.compute.memory.contract;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.testing.ChildJvm;
import java.time.Duration;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The races of {@link CompactionScenarios} on one backend, each in a JVM of its own: the child must end normally, having
 * checked every byte its threads read. A move under a user shows here as a failed test, a crash as a crashed child.
 */
public abstract class CompactionSafetyContractTest {

    /** The name the child builds its manager by: a provider's name, or {@code simulated}. */
    protected abstract String backend();

    /** Skips (with JUnit's {@code Assumptions} and the reason) where the backend cannot run here. */
    protected void assumeBackend() {}

    @ParameterizedTest
    @ValueSource(strings = {"usersAndCompactionRace", "managerClosedWhileCompacting", "allocationsCompactUnderUsers",
            "managerClosedWhileRunningOutOfMemory"})
    void compactionNeverMovesMemoryUnderItsUsers(String scenario) throws Exception {
        assumeBackend();
        ChildJvm.Result result = ChildJvm.run(Duration.ofSeconds(120), CompactionScenarios.class, backend(), scenario);
        assertThat(result.crashed()).as(result.describe()).isFalse();
        assertThat(result.exitCode()).as(result.describe()).isZero();
        assertThat(result.output()).as(result.describe()).contains("OK " + scenario);
    }
}
