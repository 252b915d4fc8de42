package dev.compute.memory.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.InvalidSettingException;
import dev.compute.memory.spi.BackendSettings;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** Grid sizes and backend options: pure arithmetic, checked without a GPU. */
class LaunchShapeTest {

    @Test
    void gridsCoverTheCountUpToTheCap() {
        assertThat(CudaKernelOps.grid(1, CudaKernelOps.MAX_GRID)).isEqualTo(1);
        assertThat(CudaKernelOps.grid(256, CudaKernelOps.MAX_GRID)).isEqualTo(1);
        assertThat(CudaKernelOps.grid(257, CudaKernelOps.MAX_GRID)).isEqualTo(2);
        assertThat(CudaKernelOps.grid(10_007, CudaKernelOps.MAX_GRID)).isEqualTo(40);
        assertThat(CudaKernelOps.grid(1L << 40, CudaKernelOps.MAX_GRID)).isEqualTo(CudaKernelOps.MAX_GRID);
        assertThat(CudaKernelOps.grid(1L << 40, CudaKernelOps.SUM_BLOCKS)).isEqualTo(CudaKernelOps.SUM_BLOCKS);
    }

    @Test
    void optionsDefaultAndParse() {
        BackendSettings none = BackendSettings.ofDevice(0);
        assertThat(CudaBackend.option(none, "streams", 4)).isEqualTo(4);
        BackendSettings some = new BackendSettings(0, true, 1 << 20, Map.of("streams", " 8 ", "staging-lanes", "0", "copy-threads", "many"));
        assertThat(CudaBackend.option(some, "streams", 4)).isEqualTo(8);
        assertThatThrownBy(() -> CudaBackend.option(some, "staging-lanes", 2))
                .isInstanceOf(InvalidSettingException.class)
                .hasMessage("invalid value '0' for staging-lanes (an option of the cuda backend): a positive whole number");
        assertThatThrownBy(() -> CudaBackend.option(some, "copy-threads", 4))
                .isInstanceOf(InvalidSettingException.class).hasMessageContaining("'many'");
        BackendSettings one = new BackendSettings(0, true, 1 << 20, Map.of("staging-buffers", "1"));
        assertThatThrownBy(() -> CudaBackend.option(one, "staging-buffers", 2, 2))
                .isInstanceOf(InvalidSettingException.class).hasMessageContaining("a whole number of at least 2");
    }
}
