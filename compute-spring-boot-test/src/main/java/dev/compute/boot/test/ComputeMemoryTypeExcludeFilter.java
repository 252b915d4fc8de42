package dev.compute.boot.test;

import org.springframework.boot.test.context.filter.annotation.StandardAnnotationCustomizableTypeExcludeFilter;

/** Leaves out of a {@link ComputeMemoryTest} every scanned component that its filters do not include. */
final class ComputeMemoryTypeExcludeFilter extends StandardAnnotationCustomizableTypeExcludeFilter<ComputeMemoryTest> {

    ComputeMemoryTypeExcludeFilter(Class<?> testClass) {
        super(testClass);
    }
}
