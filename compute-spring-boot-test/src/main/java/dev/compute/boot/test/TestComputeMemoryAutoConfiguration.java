package dev.compute.boot.test;

import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.context.annotation.Bean;

/**
 * What {@link AutoConfigureComputeMemory} adds to the starter's auto-configuration: the post-processor that puts a
 * test's managers, set up from {@code spring.test.compute.*}, in place of the application's.
 */
@AutoConfiguration
public final class TestComputeMemoryAutoConfiguration {

    // static: a bean factory post-processor is made before the configuration class that declares it
    @Bean
    static TestManagersPostProcessor computeMemoryTestManagersPostProcessor() {
        return new TestManagersPostProcessor();
    }
}
