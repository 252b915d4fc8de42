package dev.compute.sample;

import dev.compute.memory.UnifiedBuffer;

/**
 * The service's own kernel, an op the backends' op set lacks: every element of a FLOAT64 buffer clamped, in
 * place, to {@code [min, max]}. One implementation per backend, chosen by {@link ClampKernelConfiguration}; each
 * reaches the memory through a {@link dev.compute.memory.BufferAccess}, so the buffer stays open while it runs.
 */
public interface ClampKernel {

    /** Clamps {@code values} (FLOAT64) in place; {@code min <= max}, both finite, as the caller has checked. */
    void clamp(UnifiedBuffer values, double min, double max);
}
