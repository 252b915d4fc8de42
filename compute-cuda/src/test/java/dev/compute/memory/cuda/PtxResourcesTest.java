package dev.compute.memory.cuda;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * The committed PTX, checked without a GPU: present, loadable by a CUDA 12 driver (ISA 8.0, sm_70, 64-bit),
 * every kernel the backend looks up is an entry, and each entry's parameters are what the launch passes
 * (pointers and counts as 8-byte integers, the scalar as f32 or f64).
 */
class PtxResourcesTest {

    private static final Pattern ENTRY = Pattern.compile("\\.visible\\s+\\.entry\\s+(\\w+)\\(([^)]*)\\)");
    private static final Pattern PARAM = Pattern.compile("\\.param\\s+\\.(\\w+)\\s+\\w+");

    static Map<String, List<String>> entries(String ptx) {
        Map<String, List<String>> entries = new LinkedHashMap<>();
        Matcher entry = ENTRY.matcher(ptx);
        while (entry.find()) {
            List<String> types = new ArrayList<>();
            Matcher param = PARAM.matcher(entry.group(2));
            while (param.find()) {
                types.add(param.group(1));
            }
            entries.put(entry.group(1), types);
        }
        return entries;
    }

    private static String read(String resource) {
        return new String(PtxModule.read(resource), StandardCharsets.US_ASCII);
    }

    private static void wellFormed(String ptx) {
        assertThat(ptx).containsPattern("(?m)^\\.version 8\\.0$");
        // the GPUs the probe lets the backend open on: a later target would fail to load on some of them
        assertThat(ptx).containsPattern("(?m)^\\.target sm_" + DriverProbe.MINIMUM_COMPUTE_CAPABILITY + "$");
        assertThat(ptx).containsPattern("(?m)^\\.address_size 64$");
        assertThat(ptx.chars().filter(c -> c == '{').count()).isEqualTo(ptx.chars().filter(c -> c == '}').count());
        assertThat(ptx.chars().allMatch(c -> c < 128)).as("PTX is ASCII").isTrue();
    }

    @Test
    void theOpSetIsThereWithTheLaunchSignatures() {
        String ptx = read(CudaKernelOps.PTX);
        wellFormed(ptx);
        assertThat(entries(ptx)).containsExactlyInAnyOrderEntriesOf(Map.of(
                "fill_f32", List.of("u64", "u64", "f32"),
                "fill_f64", List.of("u64", "u64", "f64"),
                "scale_f32", List.of("u64", "u64", "f32"),
                "scale_f64", List.of("u64", "u64", "f64"),
                "axpy_f32", List.of("u64", "u64", "u64", "f32"),
                "axpy_f64", List.of("u64", "u64", "u64", "f64"),
                "sum_f32", List.of("u64", "u64", "u64"),
                "sum_f64", List.of("u64", "u64", "u64")));
    }

    @Test
    void sumsSharedArrayFitsTheBlockSize() {
        // the reduction in ops.cu is written for blocks of CudaKernelOps.BLOCK threads
        String ptx = read(CudaKernelOps.PTX);
        assertThat(ptx).contains(".shared .align 8 .b8 _ZZ3sumIfEvPKT_yPdE5cache[" + CudaKernelOps.BLOCK * 8 + "]");
        assertThat(ptx).contains(".shared .align 8 .b8 _ZZ3sumIdEvPKT_yPdE5cache[" + CudaKernelOps.BLOCK * 8 + "]");
    }

    @Test
    void theTestKernelsAreThere() {
        String ptx = read("/dev/compute/memory/cuda/test-kernels.ptx");
        wellFormed(ptx);
        assertThat(entries(ptx)).containsExactly(
                Map.entry("spin", List.of("u64")),
                Map.entry("scale_add_index", List.of("u64", "u64", "f32")));
    }
}
