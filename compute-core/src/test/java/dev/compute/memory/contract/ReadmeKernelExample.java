package dev.compute.memory.contract;

import static java.lang.foreign.ValueLayout.JAVA_DOUBLE;
import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.ComputeKernel;
import dev.compute.memory.DataType;
import dev.compute.memory.KernelSource;
import dev.compute.memory.LaunchShape;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * The root README's kernel examples ("Your own kernels on pooled memory"), word for word between the {@code README:}
 * markers, for the backends' tests to run ({@code CpuReadmeKernelExampleTest}, {@code OpenClReadmeKernelExampleTest},
 * {@code CudaReadmeKernelExampleTest}); {@link #assertTheReadmeShows} checks that the README still shows them.
 */
public final class ReadmeKernelExample {
    private ReadmeKernelExample() {}

    /** The OpenCL C of the every-backend example, as the README names it. */
    static final String CLAMP_CL = """
            __kernel void clamp_f64(__global double *x, long n, double lo, double hi) {
                long i = get_global_id(0);
                if (i < n) x[i] = clamp(x[i], lo, hi);
            }""";
    /** The PTX of the README's {@code clamp.cu}, which {@code src/test/cuda/kernel-contract.cu} holds. */
    static final String CLAMP_PTX = KernelContractTest.PTX;

    /** The OpenCL example: clamps {@code values} to [-1, 1] in place. */
    public static void openCl(UnifiedMemoryManager memory, double[] values) {
        int n = values.length;
        // README: opencl
        ComputeKernel clamp = memory.kernels().compile(KernelSource.openCl("""
                __kernel void clamp_f64(__global double *x, long n, double lo, double hi) {
                    long i = get_global_id(0);
                    if (i < n) x[i] = clamp(x[i], lo, hi);
                }""", "clamp_f64"));                                    // built once per manager
        try (UnifiedBuffer x = memory.allocate(DataType.FLOAT64, n)) {
            x.copyFrom(values);
            clamp.launch(LaunchShape.of(n), x, (long) n, -1.0, 1.0);   // x, n, lo, hi
            x.copyTo(values);                                          // waits for the kernel
        }
        // README: end
    }

    /** The CUDA example: the same, from PTX. */
    public static void cuda(UnifiedMemoryManager memory, double[] values) {
        int n = values.length;
        // README: cuda
        ComputeKernel clamp = memory.kernels().compile(KernelSource.ptx(CLAMP_PTX, "clamp_f64"));
        try (UnifiedBuffer x = memory.allocate(DataType.FLOAT64, n)) {
            x.copyFrom(values);
            clamp.launch(LaunchShape.of(n), x, (long) n, -1.0, 1.0);
            x.copyTo(values);
        }
        // README: end
    }

    /** The example for every backend: one source per backend, the rest shared. */
    public static KernelSource everyBackend(UnifiedMemoryManager memory, double[] values) {
        int n = values.length;
        // README: every backend
        ComputeKernel clamp = memory.kernels().compile(
                KernelSource.openCl(CLAMP_CL, "clamp_f64"),            // the opencl backend
                KernelSource.ptx(CLAMP_PTX, "clamp_f64"),              // the cuda backend
                KernelSource.java("clamp_f64", (shape, args) -> {      // the cpu backend
                    MemorySegment x = args.segment(0);
                    for (long i = 0; i < args.longValue(1); i++) {
                        x.setAtIndex(JAVA_DOUBLE, i, Math.clamp(x.getAtIndex(JAVA_DOUBLE, i), args.doubleValue(2), args.doubleValue(3)));
                    }
                }));
        // README: end
        try (UnifiedBuffer x = memory.allocate(DataType.FLOAT64, n)) {
            x.copyFrom(values);
            clamp.launch(LaunchShape.of(n), x, (long) n, -1.0, 1.0);
            x.copyTo(values);
        }
        return clamp.source();
    }

    /** Values from -2.5 to 2.5, which the examples clamp to [-1, 1]. */
    public static double[] values() {
        double[] values = new double[1001];
        for (int i = 0; i < values.length; i++) {
            values[i] = i / 200.0 - 2.5;
        }
        return values;
    }

    /** What {@link #values()} become. */
    public static void assertClamped(double[] values) {
        double[] original = values();
        for (int i = 0; i < values.length; i++) {
            assertThat(values[i]).as("element %d", i).isEqualTo(Math.clamp(original[i], -1.0, 1.0));
        }
    }

    /**
     * Checks that the root README shows the example named {@code marker} line for line (indentation aside): the
     * lines of this file between {@code // README: marker} and {@code // README: end}.
     */
    public static void assertTheReadmeShows(String marker) throws IOException {
        Path root = Path.of("..").toAbsolutePath().normalize();
        List<String> source = Files.readAllLines(root.resolve("compute-core/src/test/java/dev/compute/memory/contract/ReadmeKernelExample.java"));
        List<String> example = new ArrayList<>();
        boolean inside = false;
        for (String line : source) {
            if (line.trim().equals("// README: " + marker)) {
                inside = true;
            } else if (inside && line.trim().equals("// README: end")) {
                break;
            } else if (inside) {
                example.add(line.strip());
            }
        }
        assertThat(example).as("the example '%s' in this file", marker).isNotEmpty();
        List<String> readme = Files.readAllLines(root.resolve("README.md")).stream().map(String::strip).toList();
        assertThat(indexOf(readme, example)).as("README.md shows the example '%s':%n%s", marker, String.join("\n", example))
                .isNotNegative();
    }

    private static int indexOf(List<String> lines, List<String> block) {
        for (int start = 0; start + block.size() <= lines.size(); start++) {
            if (lines.subList(start, start + block.size()).equals(block)) {
                return start;
            }
        }
        return -1;
    }
}
