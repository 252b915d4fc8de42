package dev.compute.memory.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.compute.memory.BackendUnavailableException;
import dev.compute.memory.spi.BackendAvailability;
import dev.compute.memory.spi.BackendSelection;
import dev.compute.memory.spi.BackendSettings;
import dev.compute.memory.spi.ComputeBackendProvider;
import org.junit.jupiter.api.Test;

class CudaBackendProviderTest {

    private final CudaBackendProvider provider = new CudaBackendProvider();

    @Test
    void isNamedCudaAndOutranksTheOtherBackends() {
        assertThat(provider.name()).isEqualTo("cuda");
        assertThat(provider.priority()).isEqualTo(100);
    }

    @Test
    void isFoundByTheServiceLoader() {
        assertThat(BackendSelection.providers(getClass().getClassLoader()))
                .extracting(ComputeBackendProvider::name).contains("cuda");
    }

    @Test
    void withoutTheDriverItIsUnavailableAndSaysWhy() {
        assumeTrue(DriverLibrary.loadedOrNull() == null, "libcuda.so.1 loads on this machine; the GPU tests cover it");
        BackendAvailability availability = provider.availability(BackendSettings.ofDevice(0));
        assertThat(availability.available()).isFalse();
        assertThat(availability.detail()).startsWith("libcuda.so.1 not found").contains("NVIDIA driver");
    }

    @Test
    void withoutTheDriverCreatingItFailsWithTheReasonAndChoosingItByNameToo() {
        assumeTrue(DriverLibrary.loadedOrNull() == null, "libcuda.so.1 loads on this machine; the GPU tests cover it");
        BackendSettings settings = BackendSettings.ofDevice(0);
        assertThatThrownBy(() -> provider.create(settings))
                .isInstanceOf(BackendUnavailableException.class)
                .hasMessageContaining("'cuda' is not available: libcuda.so.1 not found");
        assertThatThrownBy(() -> BackendSelection.choose("cuda", settings, BackendSelection.providers(getClass().getClassLoader())))
                .isInstanceOf(BackendUnavailableException.class)
                .hasMessageContaining("libcuda.so.1 not found");
    }

    @Test
    void withoutTheDriverAutoPassesItOverWithItsReason() {
        assumeTrue(DriverLibrary.loadedOrNull() == null, "libcuda.so.1 loads on this machine; the GPU tests cover it");
        ComputeBackendProvider alwaysThere = new ComputeBackendProvider() {
            @Override
            public String name() {
                return "fallback";
            }

            @Override
            public int priority() {
                return 0;
            }

            @Override
            public BackendAvailability availability(BackendSettings settings) {
                return BackendAvailability.available("always");
            }

            @Override
            public dev.compute.memory.spi.ComputeBackend create(BackendSettings settings) {
                throw new UnsupportedOperationException();
            }
        };
        BackendSelection selection = BackendSelection.choose("auto", BackendSettings.ofDevice(0), java.util.List.of(provider, alwaysThere));
        assertThat(selection.provider()).isSameAs(alwaysThere);
        assertThat(selection.passedOver().get("cuda")).startsWith("libcuda.so.1 not found");
    }
}
