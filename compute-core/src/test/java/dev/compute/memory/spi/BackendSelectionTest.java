package dev.compute.memory.spi;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.BackendUnavailableException;
import dev.compute.memory.InvalidSettingException;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

class BackendSelectionTest {

    private record FakeProvider(String name, int priority, BackendAvailability availability) implements ComputeBackendProvider {
        @Override
        public BackendAvailability availability(BackendSettings settings) {
            return availability;
        }

        @Override
        public ComputeBackend create(BackendSettings settings) {
            return new SimulatedDiscreteBackend();
        }
    }

    private final FakeProvider gpu = new FakeProvider("cuda", 100, BackendAvailability.unavailable("libcuda.so.1 not found"));
    private final FakeProvider cl = new FakeProvider("opencl", 50, BackendAvailability.available("PoCL"));
    private final FakeProvider cpu = new FakeProvider("cpu", 0, BackendAvailability.available("2 cores"));
    private final List<ComputeBackendProvider> all = List.of(gpu, cl, cpu);
    private final BackendSettings settings = BackendSettings.ofDevice(0);

    @Test
    void autoTakesTheBestAvailableAndSaysWhyOthersWerePassedOver() {
        BackendSelection selection = BackendSelection.choose("auto", settings, all);
        assertThat(selection.provider()).isSameAs(cl);
        assertThat(selection.passedOver()).containsEntry("cuda", "libcuda.so.1 not found");
    }

    @Test
    void autoPassesOverABackendThatAsksForItButAnExplicitNameTakesIt() {
        ComputeBackendProvider cpuOpenCl = new ComputeBackendProvider() {
            public String name() { return "opencl"; }
            public int priority() { return 50; }
            public BackendAvailability availability(BackendSettings s) { return BackendAvailability.available("PoCL cpu device"); }
            public String autoPassOverReason(BackendSettings s) { return "its device is the CPU"; }
            public ComputeBackend create(BackendSettings s) { return new SimulatedDiscreteBackend(); }
        };
        BackendSelection auto = BackendSelection.choose("auto", settings, List.of(gpu, cpuOpenCl, cpu));
        assertThat(auto.provider()).isSameAs(cpu);
        assertThat(auto.passedOver()).containsEntry("opencl", "its device is the CPU");
        assertThat(BackendSelection.choose("opencl", settings, List.of(gpu, cpuOpenCl, cpu)).provider()).isSameAs(cpuOpenCl);
    }

    @Test
    void aNamedBackendRefusesAnOptionItDoesNotReadAndOneThatDoesNotSayTakesAny() {
        ComputeBackendProvider saying = new ComputeBackendProvider() {
            public String name() { return "cpu"; }
            public int priority() { return 0; }
            public BackendAvailability availability(BackendSettings s) { return BackendAvailability.available("2 cores"); }
            public Set<String> options() { return Set.of("page-size", "pinned-fallback"); }
            public ComputeBackend create(BackendSettings s) { return new SimulatedDiscreteBackend(); }
        };
        BackendSettings typo = new BackendSettings(0, true, BackendSettings.DEFAULT_STAGING_BUFFER_BYTES, Map.of("pagesize", "64KB"));
        assertThatThrownBy(() -> BackendSelection.choose("cpu", typo, List.of(saying)))
                .isInstanceOfSatisfying(InvalidSettingException.class, e -> {
                    assertThat(e.property()).isEqualTo("compute.backend-options.pagesize");
                    assertThat(e.value()).isEqualTo("64KB");
                    assertThat(e.allowed()).contains("page-size, pinned-fallback");
                });
        assertThat(BackendSelection.choose("auto", typo, List.of(saying)).provider()).as("auto: the option may be another backend's")
                .isSameAs(saying);
        assertThat(BackendSelection.unreadOptions(saying, typo)).containsExactly("pagesize");
        assertThat(BackendSelection.choose("cpu", typo, List.of(cpu)).provider()).as("a provider that does not say").isSameAs(cpu);
    }

    @Test
    void anExplicitUnavailableBackendFailsWithTheProvidersReason() {
        assertThatThrownBy(() -> BackendSelection.choose("CUDA", settings, all))
                .isInstanceOfSatisfying(BackendUnavailableException.class, e -> {
                    assertThat(e.backend()).isEqualTo("cuda");
                    assertThat(e.reason()).isEqualTo("libcuda.so.1 not found");
                });
    }

    @Test
    void anUnknownNameListsTheKnownOnes() {
        assertThatThrownBy(() -> BackendSelection.choose("tpu", settings, all))
                .isInstanceOf(InvalidSettingException.class).hasMessageContaining("auto, cuda, opencl, cpu");
    }

    @Test
    void aProviderThatThrowsWhileProbingIsPassedOver() {
        ComputeBackendProvider throwing = new ComputeBackendProvider() {
            public String name() { return "broken"; }
            public int priority() { return 200; }
            public BackendAvailability availability(BackendSettings s) { throw new UnsatisfiedLinkError("no libfoo"); }
            public ComputeBackend create(BackendSettings s) { throw new AssertionError(); }
        };
        BackendSelection selection = BackendSelection.choose("auto", settings, List.of(throwing, cpu));
        assertThat(selection.provider()).isSameAs(cpu);
        assertThat(selection.passedOver().get("broken")).contains("no libfoo");
    }
}
