package dev.compute.memory.spi;

import java.util.concurrent.CompletableFuture;

/**
 * The small op set every backend implements for {@code FLOAT32} and {@code FLOAT64}: enough to compute on
 * device data in the sample and the tests, not a kernel framework. Launches may be asynchronous; the
 * returned future completes when the work has finished on the device.
 */
public interface KernelOps {

    /** Sets every element to {@code value}. */
    CompletableFuture<Void> fill(Region target, double value);

    /** {@code x = alpha * x}. */
    CompletableFuture<Void> scale(Region x, double alpha);

    /** {@code y = alpha * x + y}; {@code x} and {@code y} have the same count and type. */
    CompletableFuture<Void> axpy(double alpha, Region x, Region y);

    /** The sum of the elements, accumulated in double precision. */
    CompletableFuture<Double> sum(Region x);
}
