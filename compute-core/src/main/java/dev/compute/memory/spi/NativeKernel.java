package dev.compute.memory.spi;

import dev.compute.memory.LaunchShape;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * A kernel a backend compiled ({@link ComputeBackend#compileKernel}). The manager calls {@link #launch} with the
 * device accesses of the buffer arguments open on the calling thread; the backend queues the kernel where those
 * accesses' handles order work (the OpenCL queue, the thread's CUDA stream), so that the marker or event the handles
 * record when the accesses end comes after it. The backend releases what it compiled when it closes. Thread-safe:
 * any number of threads launch one kernel at once.
 */
public interface NativeKernel {

    /** The kernel's name, for messages. */
    String name();

    /**
     * Checks a launch over {@code shape} against the kernel's parameters and limits, before the manager opens any
     * access for it: a launch refused here has synced, ordered, waited for and marked nothing. {@code arguments} are in
     * the kernel's parameter order: a {@link dev.compute.memory.KernelArg} for each buffer (of this manager, open, its
     * access not open yet), the {@code Integer}, {@code Long}, {@code Float} or {@code Double} of each scalar. A
     * mismatch, or a buffer where this backend's device handles cannot reach (HOST memory on OpenCL and CUDA), throws an
     * {@link IllegalArgumentException} naming the kernel and the argument. The default, for kernels
     * that check their arguments as they run (Java kernels), checks nothing.
     */
    default void check(LaunchShape shape, List<Object> arguments) {}

    /**
     * Queues one launch (or, for a Java kernel, runs it) over {@code shape} with {@code arguments} in the kernel's
     * parameter order, as {@link #check} passed them: buffers of this backend, with their handles open, and scalars of
     * the four types {@link KernelArgument.Scalar} allows. The future completes when the kernel has finished.
     */
    CompletableFuture<Void> launch(LaunchShape shape, List<KernelArgument> arguments);
}
