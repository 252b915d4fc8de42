package dev.compute.boot.test;

import org.springframework.boot.test.autoconfigure.TestSliceTestContextBootstrapper;

/** Bootstraps a {@link ComputeMemoryTest}: its {@code properties} go into the test's environment. */
final class ComputeMemoryTestContextBootstrapper extends TestSliceTestContextBootstrapper<ComputeMemoryTest> {}
