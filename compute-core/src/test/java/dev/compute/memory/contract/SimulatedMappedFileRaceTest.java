package dev.compute.memory.contract;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.testing.ChildJvm;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** {@link MappedFileRaceScenarios} on the simulated discrete device, and the one that needs no backend in particular. */
class SimulatedMappedFileRaceTest extends MappedFileRaceContractTest {

    @Override
    protected String backend() {
        return "simulated";
    }

    /**
     * A finding: {@code mapFile} checks that the path is a regular file and then opens it; a named pipe renamed over
     * the path in between is opened, and the open blocks for ever (the child prints HUNG and the stack, and exits 3).
     */
    @Test
    void aPipeRenamedOverAMappedPathNeverHangsTheCall() throws Exception {
        String scenario = "aPipeRenamedOverTheFileBetweenTheCheckAndTheOpen";
        ChildJvm.Result result = ChildJvm.run(Duration.ofSeconds(120), MappedFileRaceScenarios.class, backend(), scenario);
        assertThat(result.crashed()).as(result.describe()).isFalse();
        assertThat(result.output()).as(result.describe()).doesNotContain("HUNG");
        assertThat(result.exitCode()).as(result.describe()).isZero();
        assertThat(result.output()).as(result.describe()).contains("OK " + scenario);
    }
}
