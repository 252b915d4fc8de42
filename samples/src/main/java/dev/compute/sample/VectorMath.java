package dev.compute.sample;

import dev.compute.memory.DataType;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import org.jspecify.annotations.Nullable;
import org.springframework.stereotype.Service;

/**
 * Math on posted arrays: each call copies its arrays into FLOAT64 buffers at the default location, runs one op
 * of the backend's op set there and copies the result back. The buffers go back to the pool at once, so a
 * steady stream of same-size requests is served from the pool's cache.
 */
@Service
public class VectorMath {

    private final UnifiedMemoryManager manager;

    public VectorMath(UnifiedMemoryManager manager) {
        this.manager = manager;
    }

    /** {@code alpha * x + y}. */
    public double[] axpy(double alpha, double @Nullable [] x, double @Nullable [] y) {
        VectorStore.checkValues("x", x);
        VectorStore.checkValues("y", y);
        if (x.length != y.length) {
            throw new IllegalArgumentException("'x' (" + x.length + " elements) and 'y' (" + y.length + " elements) differ in length");
        }
        try (UnifiedBuffer xs = load(x); UnifiedBuffer ys = load(y)) {
            manager.ops().axpy(alpha, xs, ys);
            double[] result = new double[y.length];
            ys.copyTo(result);
            return result;
        }
    }

    public double[] scale(double alpha, double @Nullable [] x) {
        VectorStore.checkValues("x", x);
        try (UnifiedBuffer xs = load(x)) {
            manager.ops().scale(xs, alpha);
            double[] result = new double[x.length];
            xs.copyTo(result);
            return result;
        }
    }

    public double sum(double @Nullable [] x) {
        VectorStore.checkValues("x", x);
        try (UnifiedBuffer xs = load(x)) {
            return manager.ops().sum(xs);
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
