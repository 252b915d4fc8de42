package dev.compute.memory;

import java.lang.foreign.MemorySegment;

/**
 * A kernel written in Java, for the backends whose memory the host reaches (the CPU backend; the simulated device),
 * so that a service's code that launches kernels runs unchanged on a machine without an accelerator
 * ({@link KernelSource#java}).
 *
 * <p>It runs once per launch, on the launching thread, before {@link ComputeKernel#launch} returns: loop over
 * the shape yourself ({@code shape.size(0)} work items in the first dimension, exactly as asked: nothing is
 * rounded up). Each buffer argument is its bytes as a {@link MemorySegment} of the launch's device access
 * (read-only for a {@link KernelArg#read} argument), valid until the body returns; each scalar is the value passed.
 *
 * <pre>{@code
 * JavaKernel clamp = (shape, args) -> {
 *     MemorySegment x = args.segment(0);
 *     double lo = args.doubleValue(2), hi = args.doubleValue(3);
 *     for (long i = 0; i < args.longValue(1); i++) {
 *         x.setAtIndex(JAVA_DOUBLE, i, Math.clamp(x.getAtIndex(JAVA_DOUBLE, i), lo, hi));
 *     }
 * };
 * }</pre>
 *
 * <p>An exception it throws fails the launch's future (the buffers' accesses end as after any launch).
 *
 * <p>Nothing bounds how long it runs: the launch is a call of the manager, so a close on another thread waits for it
 * at most the close timeout ({@code compute.memory.close-timeout}), then returns, keeping the pools' memory (a WARNING
 * names the kernel's thread as holding accesses) rather than free it under the kernel, which goes on over its
 * buffers' own bytes. A kernel that may run long checks for a stop of its own.
 */
@FunctionalInterface
public interface JavaKernel {

    void run(LaunchShape shape, Arguments arguments);

    /** The launch's arguments, by position as they were passed to {@link ComputeKernel#launch}. */
    interface Arguments {

        /** How many arguments the launch was given. */
        int count();

        /** Argument {@code index}, a buffer: its bytes (read-only for a READ argument), on the launching thread. */
        MemorySegment segment(int index);

        /** Argument {@code index}, an {@code Integer}. */
        int intValue(int index);

        /** Argument {@code index}, a {@code Long}. */
        long longValue(int index);

        /** Argument {@code index}, a {@code Float}. */
        float floatValue(int index);

        /** Argument {@code index}, a {@code Double}. */
        double doubleValue(int index);
    }
}
