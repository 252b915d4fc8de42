/**
 * A discrete device simulated in software ({@link dev.compute.memory.simulated.SimulatedDiscreteBackend}): memory
 * the host cannot address, copies counted, a capacity that runs out. For tests of code written for a GPU, on any
 * machine; not a backend for production (it is never chosen by {@code auto}).
 */
@NullMarked
package dev.compute.memory.simulated;

import org.jspecify.annotations.NullMarked;
