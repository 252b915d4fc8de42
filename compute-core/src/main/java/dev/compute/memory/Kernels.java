package dev.compute.memory;

import java.util.Set;

/**
 * A manager's kernels ({@link UnifiedMemoryManager#kernels()}): compiles one's own kernels for the manager's device,
 * once each, and keeps them until the manager closes.
 *
 * <pre>{@code
 * ComputeKernel clamp = memory.kernels().compile(
 *         KernelSource.openCl(CLAMP_CL, "clamp_f64"),
 *         KernelSource.ptx(CLAMP_PTX, "clamp_f64"),
 *         KernelSource.java("clamp_f64", Clamp::run));
 * clamp.launch(LaunchShape.of(n), values, n, lo, hi).join();
 * }</pre>
 */
public interface Kernels {

    /**
     * The kernel of the first of the sources given whose language this manager's backend runs
     * ({@link #languages()}), compiled on the first call and the same object on every later call with an equal
     * source, from any thread (a call that finds the compile under way waits for it). A failed compile is not kept:
     * the next call tries again. A Java kernel is kept only while someone holds it: its body is compared by identity,
     * so a lambda capturing a request's state is a new source each time, and is not kept with what it captures.
     *
     * @throws KernelCompileException the source does not compile (with the compiler's log), or has no kernel of its name
     * @throws UnsupportedOperationException no source given is in a language the backend runs; the message names both
     * @throws IllegalStateException the manager is closed
     */
    ComputeKernel compile(KernelSource source, KernelSource... alternatives);

    /** The languages this manager's backend compiles: OpenCL C on {@code opencl}, PTX on {@code cuda}, Java on {@code cpu}. */
    Set<KernelSource.Language> languages();
}
