package dev.compute.memory.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.spi.BackendOutOfMemoryException;
import org.junit.jupiter.api.Test;

class CudaResultsTest {

    @Test
    void successPasses() {
        assertThatCode(() -> CudaResults.check(0, "cuMemAlloc")).doesNotThrowAnyException();
    }

    @Test
    void outOfMemoryIsTheSpisOutOfMemory() {
        assertThatThrownBy(() -> CudaResults.check(2, "cuMemAlloc(1099511627776 bytes on device 0)"))
                .isExactlyInstanceOf(BackendOutOfMemoryException.class)
                .hasMessage("cuMemAlloc(1099511627776 bytes on device 0) failed: CUDA_ERROR_OUT_OF_MEMORY (2)");
    }

    @Test
    void anyOtherErrorNamesTheCallAndTheResult() {
        assertThatThrownBy(() -> CudaResults.check(1, "cuMemCreate(2097152 bytes)"))
                .isInstanceOfSatisfying(CudaException.class, e -> {
                    assertThat(e.call()).isEqualTo("cuMemCreate(2097152 bytes)");
                    assertThat(e.result()).isEqualTo(1);
                    assertThat(e).hasMessage("cuMemCreate(2097152 bytes) failed: CUDA_ERROR_INVALID_VALUE (1)");
                });
        assertThat(CudaResults.name(222)).isEqualTo("CUDA_ERROR_UNSUPPORTED_PTX_VERSION (222)");
    }

    @Test
    void aStickyErrorSaysTheContextIsLost() {
        // cuda.h: after each of these "the context cannot be used"; 701 (too many resources asked) and 999 are not sticky
        for (int sticky : new int[] {700, 702, 710, 714, 715, 716, 717, 718, 719, 911}) {
            assertThatThrownBy(() -> CudaResults.check(sticky, "cuMemMap(0x7f0000000000, 2097152 bytes)"))
                    .isInstanceOfSatisfying(CudaContextLostException.class, e -> assertThat(e.result()).isEqualTo(sticky))
                    .hasMessageStartingWith("cuMemMap(0x7f0000000000, 2097152 bytes) failed: " + CudaResults.name(sticky) + ": the device's context is lost");
        }
        for (int notSticky : new int[] {1, 201, 701, 999}) {
            assertThatThrownBy(() -> CudaResults.check(notSticky, "cuLaunchKernel")).isExactlyInstanceOf(CudaException.class);
        }
    }

    @Test
    void anUnknownCodeIsShownAsANumber() {
        assertThat(CudaResults.name(12345)).isEqualTo("CUresult 12345");
    }
}
