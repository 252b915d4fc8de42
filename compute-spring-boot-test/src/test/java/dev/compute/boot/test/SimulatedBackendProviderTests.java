package dev.compute.boot.test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.BackendUnavailableException;
import dev.compute.memory.spi.BackendSelection;
import dev.compute.memory.spi.BackendSettings;
import dev.compute.memory.spi.ComputeBackendProvider;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The simulated device is a backend by name only: {@code auto} passes it over, even when it is the only one. */
class SimulatedBackendProviderTests {

    private final BackendSettings settings = BackendSettings.ofDevice(0);
    private final List<ComputeBackendProvider> onTheClassPath = BackendSelection.providers(getClass().getClassLoader());

    @Test
    void thisLibraryRegistersItBesideTheCpuBackend() {
        assertThat(onTheClassPath).extracting(ComputeBackendProvider::name).contains("simulated", "cpu");
    }

    @Test
    void autoPassesItOverEvenWhereItComesFirst() {
        List<ComputeBackendProvider> simulatedFirst = new ArrayList<>(onTheClassPath);
        simulatedFirst.sort(Comparator.comparing(provider -> !provider.name().equals("simulated")));

        BackendSelection selection = BackendSelection.choose("auto", settings, simulatedFirst);

        assertThat(selection.provider().name()).isEqualTo("cpu");
        assertThat(selection.passedOver()).containsEntry("simulated",
                "the simulated device is for tests and is chosen only by name (compute.backend: simulated)");
    }

    @Test
    void autoNeverTakesItEvenAlone() {
        assertThatThrownBy(() -> BackendSelection.choose("auto", settings, List.of(new SimulatedBackendProvider())))
                .isInstanceOf(BackendUnavailableException.class).hasMessageContaining("chosen only by name");
    }

    @Test
    void byNameItIsChosen() {
        assertThat(BackendSelection.choose("simulated", settings, onTheClassPath).provider()).isInstanceOf(SimulatedBackendProvider.class);
    }

    @Test
    void itHasOneDevice() {
        assertThatThrownBy(() -> BackendSelection.choose("simulated", BackendSettings.ofDevice(1), onTheClassPath))
                .isInstanceOf(BackendUnavailableException.class).hasMessageContaining("one device, index 0");
    }
}
