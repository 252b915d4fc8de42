/**
 * Test support for applications on the compute memory starter: {@link dev.compute.boot.test.AutoConfigureComputeMemory}
 * for a manager in slice tests, {@link dev.compute.boot.test.ComputeMemoryExtension} to fail a test that leaves
 * buffers open, {@link dev.compute.boot.test.ComputeMemoryAssertions} for AssertJ, and the simulated discrete device
 * by name ({@code compute.backend: simulated}).
 */
@NullMarked
package dev.compute.boot.test;

import org.jspecify.annotations.NullMarked;
