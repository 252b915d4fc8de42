package dev.compute.memory;

import java.util.concurrent.CompletableFuture;

/**
 * A kernel compiled for a manager's device ({@link Kernels#compile}), launched on that manager's buffers. Any
 * number of threads may launch it at once. It lives as long as its manager: the manager's close releases it, and a
 * launch after that fails.
 *
 * <pre>{@code
 * ComputeKernel scale = memory.kernels().compile(KernelSource.openCl(SOURCE, "scale"));
 * scale.launch(LaunchShape.of(n), x, n, 2.0f).join();   // __kernel void scale(__global float *x, long n, float a)
 * }</pre>
 */
public interface ComputeKernel {

    /** The kernel's name, as its source gives it. */
    String name();

    /** The source the manager compiled: of the alternatives given, the one its backend runs. */
    KernelSource source();

    /**
     * Launches the kernel over {@code shape} with {@code arguments}, in the kernel's parameter order:
     * <table>
     *   <caption>Arguments and the C type each is passed as</caption>
     *   <tr><th>Java</th><th>OpenCL C</th><th>CUDA C++</th></tr>
     *   <tr><td>{@link UnifiedBuffer} (and slices), {@link KernelArg}</td><td>{@code __global T *}</td><td>{@code T *}</td></tr>
     *   <tr><td>{@code Integer}</td><td>{@code int} / {@code uint}</td><td>{@code int} / {@code unsigned}</td></tr>
     *   <tr><td>{@code Long}</td><td>{@code long} / {@code ulong}</td><td>{@code long long} / {@code size_t}</td></tr>
     *   <tr><td>{@code Float}</td><td>{@code float}</td><td>{@code float}</td></tr>
     *   <tr><td>{@code Double}</td><td>{@code double}</td><td>{@code double}</td></tr>
     * </table>
     * A buffer passed alone is read and written; say {@link KernelArg#read} or {@link KernelArg#write} where the
     * kernel only reads or only writes it. Mind Java's literals: {@code 2.0} is a {@code Double}, {@code 2.0f} a
     * {@code Float}, {@code n} of type {@code long} a {@code Long}. One buffer may be passed twice (or a buffer and its
     * slice) where the kernel only reads both or the backend is CUDA or the CPU; on OpenCL each is a sub-buffer of its
     * own, and OpenCL leaves a kernel that writes through one of two overlapping sub-buffers undefined.
     *
     * <p>On the calling thread, before it returns, the launch takes a device access on each buffer
     * ({@link UnifiedBuffer#deviceAccess}): so a newer host copy is synced first, earlier device work on the buffer
     * is ordered before the kernel, and the buffer's memory stays held, whoever closes it, until the kernel is done.
     * It queues the kernel on the accesses' queue (OpenCL) or the calling thread's stream (CUDA), or runs a Java
     * kernel, then ends the accesses, which records the kernel as device work in flight on every buffer and marks
     * each written one's device copy newer: a {@code copyTo}, a host view or a close waits for the kernel, with no
     * sync of one's own.
     *
     * @return completes when the kernel has finished on the device (at once for a Java kernel, which ran already);
     *     fails with the device's error, or the Java kernel's exception
     * @throws IllegalArgumentException a wrong argument, naming the kernel and the argument: another manager's
     *     buffer, a type not in the table, a null, memory the kernel cannot reach (HOST memory on OpenCL and CUDA)
     * @throws IllegalStateException a closed buffer or manager, naming the kernel and the argument
     */
    CompletableFuture<Void> launch(LaunchShape shape, Object... arguments);
}
