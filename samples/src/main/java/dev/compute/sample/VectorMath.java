package dev.compute.sample;

import dev.compute.memory.DataType;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import org.jspecify.annotations.Nullable;
import org.springframework.stereotype.Service;

/**
 * Math on posted arrays: each call copies its arrays into FLOAT64 buffers at the default location, runs one op
 * of the backend's op set there (or the service's own {@link ClampKernel}) and copies the result back. The
 * buffers go back to the pool at once, so a steady stream of same-size requests is served from the pool's cache.
 */
@Service
public class VectorMath {

    private final UnifiedMemoryManager manager;
    private final ClampKernel clampKernel;

    public VectorMath(UnifiedMemoryManager manager, ClampKernel clampKernel) {
        this.manager = manager;
        this.clampKernel = clampKernel;
    }

    /** {@code alpha * x + y}. */
    public double[] axpy(double alpha, double @Nullable [] x, double @Nullable [] y) {
        VectorStore.checkFinite("alpha", alpha);
        VectorStore.checkValues("x", x);
        VectorStore.checkValues("y", y);
        if (x.length != y.length) {
            throw new IllegalArgumentException("'x' (" + x.length + " elements) and 'y' (" + y.length + " elements) differ in length");
        }
        try (UnifiedBuffer xs = load(x); UnifiedBuffer ys = load(y)) {
            manager.ops().axpy(alpha, xs, ys);
            double[] result = new double[y.length];
            ys.copyTo(result);
            return VectorStore.checkResult("alpha * x + y", result);
        }
    }

    public double[] scale(double alpha, double @Nullable [] x) {
        VectorStore.checkFinite("alpha", alpha);
        VectorStore.checkValues("x", x);
        try (UnifiedBuffer xs = load(x)) {
            manager.ops().scale(xs, alpha);
            double[] result = new double[x.length];
            xs.copyTo(result);
            return VectorStore.checkResult("alpha * x", result);
        }
    }

    public double sum(double @Nullable [] x) {
        VectorStore.checkValues("x", x);
        try (UnifiedBuffer xs = load(x)) {
            return VectorStore.checkResult("the sum of 'x'", manager.ops().sum(xs));
        }
    }

    /** Each element of {@code x} clamped to {@code [min, max]}, by the service's own kernel. */
    public double[] clamp(double @Nullable [] x, double min, double max) {
        VectorStore.checkValues("x", x);
        VectorStore.checkFinite("min", min);
        VectorStore.checkFinite("max", max);
        if (Double.compare(min, max) > 0) { // as Math.clamp orders them: 0.0 above -0.0
            throw new IllegalArgumentException("'min' (" + min + ") is greater than 'max' (" + max + ")");
        }
        try (UnifiedBuffer xs = load(x)) {
            clampKernel.clamp(xs, min, max);
            double[] result = new double[x.length];
            xs.copyTo(result);
            return result;
        }
    }

    private UnifiedBuffer load(double[] values) {
        UnifiedBuffer buffer = manager.allocate(DataType.FLOAT64, values.length);
        try {
            buffer.copyFrom(values);
            return buffer;
        } catch (RuntimeException e) {
            buffer.close();
            throw e;
        }
    }
}
