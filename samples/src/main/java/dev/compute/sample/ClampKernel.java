package dev.compute.sample;

import static java.lang.foreign.ValueLayout.JAVA_DOUBLE_UNALIGNED;

import dev.compute.memory.ComputeKernel;
import dev.compute.memory.JavaKernel;
import dev.compute.memory.KernelSource;
import dev.compute.memory.LaunchShape;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;

/**
 * The service's own kernel, an op the backends' op set lacks: every element of a FLOAT64 buffer clamped, in place,
 * to {@code [min, max]}. One source per backend, the rest shared: OpenCL C ({@code kernels/clamp.cl}) for
 * {@code opencl}, PTX ({@code kernels/clamp.ptx}, made by nvcc from {@code src/main/cuda/clamp.cu}) for {@code cuda},
 * and a Java loop for {@code cpu} (and the simulated device of the tests). The manager compiles the one its backend
 * runs, once, when this bean is made, and releases it when it closes.
 */
public final class ClampKernel {

    static final String OPENCL_C = resource("/kernels/clamp.cl");
    static final String PTX = resource("/kernels/clamp.ptx");
    /** The same kernel in Java: {@code x[i] = clamp(x[i], lo, hi)} for {@code i < n}, over the buffer's bytes. */
    static final JavaKernel JAVA = (shape, args) -> {
        MemorySegment x = args.segment(0);
        long n = args.longValue(1);
        double lo = args.doubleValue(2);
        double hi = args.doubleValue(3);
        for (long i = 0; i < n; i++) {
            x.setAtIndex(JAVA_DOUBLE_UNALIGNED, i, Math.clamp(x.getAtIndex(JAVA_DOUBLE_UNALIGNED, i), lo, hi));
        }
    };

    private final ComputeKernel kernel;

    public ClampKernel(UnifiedMemoryManager manager) {
        this.kernel = manager.kernels().compile(
                KernelSource.openCl(OPENCL_C, "clamp_f64"),
                KernelSource.ptx(PTX, "clamp_f64"),
                KernelSource.java("clamp_f64", JAVA));
    }

    /**
     * Clamps {@code values} (FLOAT64, a buffer or a slice) in place; {@code min <= max}, both finite, as the caller has
     * checked. Returns once the kernel has run: its failure on the device is thrown here, not found later in the data.
     */
    public void clamp(UnifiedBuffer values, double min, double max) {
        long n = values.elementCount();
        kernel.launch(LaunchShape.of(n), values, n, min, max).join();
    }

    /** The source the manager compiled: which of the three this backend runs. */
    public KernelSource source() {
        return kernel.source();
    }

    private static String resource(String name) {
        try (InputStream in = ClampKernel.class.getResourceAsStream(name)) {
            if (in == null) {
                throw new IllegalStateException(name + " is missing from the class path");
            }
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException("reading " + name, e);
        }
    }
}
