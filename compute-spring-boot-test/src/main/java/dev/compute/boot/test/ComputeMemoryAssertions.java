package dev.compute.boot.test;

import dev.compute.memory.UnifiedMemoryManager;

/**
 * AssertJ's entry point for compute memory: {@code assertThat(manager).hasNoOpenBuffers()}. Import it statically
 * beside AssertJ's own {@code Assertions.assertThat}; the two overloads do not clash.
 */
public final class ComputeMemoryAssertions {

    private ComputeMemoryAssertions() {}

    public static UnifiedMemoryManagerAssert assertThat(UnifiedMemoryManager actual) {
        return new UnifiedMemoryManagerAssert(actual);
    }
}
