package dev.compute.memory.contract;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.testing.ChildJvm;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/**
 * {@link CompactionCallerScenarios} on one backend, each in a JVM of its own: compactions, trims and cache releases at
 * once among users. The child must end normally, having checked every byte its threads read.
 */
public abstract class CompactionCallerSafetyContractTest {

    /** The name the child builds its manager by: a provider's name, or {@code simulated}. */
    protected abstract String backend();

    static void assertScenarioPasses(String backend, String scenario) throws Exception {
        ChildJvm.Result result = ChildJvm.run(Duration.ofSeconds(120), CompactionCallerScenarios.class, backend, scenario);
        assertThat(result.crashed()).as(result.describe()).isFalse();
        assertThat(result.exitCode()).as(result.describe()).isZero();
        assertThat(result.output()).as(result.describe()).contains("OK " + scenario);
    }

    @Test
    void compactionsTrimsAndCacheReleasesAtOnceNeverMoveMemoryUnderItsUsers() throws Exception {
        assertScenarioPasses(backend(), "compactionsTrimsAndReleasesAtOnce");
    }
}
