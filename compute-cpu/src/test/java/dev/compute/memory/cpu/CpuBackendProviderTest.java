package dev.compute.memory.cpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.BackendUnavailableException;
import dev.compute.memory.spi.BackendAvailability;
import dev.compute.memory.spi.BackendSelection;
import dev.compute.memory.spi.BackendSettings;
import dev.compute.memory.spi.ComputeBackend;
import dev.compute.memory.spi.ComputeBackendProvider;
import java.util.List;
import org.junit.jupiter.api.Test;

class CpuBackendProviderTest {

    @Test
    void foundByTheServiceLoaderAsCpuWithTheLowestPriority() {
        List<ComputeBackendProvider> providers = BackendSelection.providers(getClass().getClassLoader());
        assertThat(providers).filteredOn(p -> p.name().equals("cpu")).singleElement()
                .isInstanceOf(CpuBackendProvider.class)
                .extracting(ComputeBackendProvider::priority).isEqualTo(0);
    }

    @Test
    void autoChoosesItWhenNoAcceleratorIsOnTheClassPath() {
        BackendSelection selection = BackendSelection.choose("auto", BackendSettings.ofDevice(0),
                BackendSelection.providers(getClass().getClassLoader()));
        assertThat(selection.provider().name()).isEqualTo("cpu");
        assertThat(selection.detail()).containsPattern("\\d+ processors, \\d+ MiB memory \\(\\d+ MiB available\\)");
    }

    @Test
    void availableOnDeviceZeroOnlyWithTheReason() {
        CpuBackendProvider provider = new CpuBackendProvider();
        assertThat(provider.availability(BackendSettings.ofDevice(0)).available()).isTrue();
        BackendAvailability second = provider.availability(BackendSettings.ofDevice(1));
        assertThat(second.available()).isFalse();
        assertThat(second.detail()).contains("one device, index 0");
        assertThatThrownBy(() -> provider.create(BackendSettings.ofDevice(1))).isInstanceOf(BackendUnavailableException.class)
                .hasMessageContaining("compute backend 'cpu' is not available");
    }

    @Test
    void createsAWorkingBackend() {
        try (ComputeBackend backend = new CpuBackendProvider().create(BackendSettings.ofDevice(0))) {
            assertThat(backend).isInstanceOf(CpuBackend.class);
            assertThat(backend.info().backend()).isEqualTo("cpu");
        }
    }

    @Test
    void thisPlatformIsSupported() {
        assertThat(CpuBackendProvider.unsupportedPlatform()).isNull();
    }
}
