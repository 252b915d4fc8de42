package dev.compute.boot.test;

import dev.compute.memory.LeakDetectionLevel;
import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Inherited;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import org.springframework.boot.autoconfigure.ImportAutoConfiguration;
import org.springframework.boot.test.context.PropertyMapping;

/**
 * Gives a test's application context the starter's {@link dev.compute.memory.UnifiedMemoryManager} bean, set up for
 * tests: on the CPU backend (there on every machine), leak detection {@code paranoid} (every buffer tracked, with
 * the stack it was allocated from) and a small pool, so a runaway allocation fails at once rather than taking the
 * machine's memory. Slice tests ({@code @WebMvcTest}, {@code @JsonTest}, ...) leave the starter's
 * auto-configuration out; this imports it, as Spring Boot's own {@code @AutoConfigure...} annotations import
 * theirs (the list is {@code META-INF/spring/dev.compute.boot.test.AutoConfigureComputeMemory.imports}). On a full
 * {@code @SpringBootTest}, which has the auto-configuration already, it sets the manager up for tests.
 *
 * <p>Each attribute sets a {@code compute.*} property, above {@code application.yml} and the test's own
 * properties: change a setting here, not there. The caps come with the settings that must stay below them (the
 * release threshold, the staging buffer), so an {@code application.yml} written for production cannot contradict
 * them. Pair it with {@link ComputeMemoryExtension} to fail a test that
 * leaves buffers open.
 */
@Target(ElementType.TYPE)
@Retention(RetentionPolicy.RUNTIME)
@Documented
@Inherited
@ImportAutoConfiguration
@PropertyMapping("compute")
public @interface AutoConfigureComputeMemory {

    /**
     * {@code compute.backend}: {@code cpu}, there on every machine; {@code simulated}, a discrete device in software
     * (memory the host cannot address, so buffers copy and sync as on a GPU); or any backend on the class path.
     */
    String backend() default "cpu";

    /** {@code compute.memory.leak-detection}: {@code PARANOID} records where every buffer was allocated. */
    @PropertyMapping("memory.leak-detection")
    LeakDetectionLevel leakDetection() default LeakDetectionLevel.PARANOID;

    /** {@code compute.memory.pooling.max-pool-size}: the cap on reserved bytes per location. */
    @PropertyMapping("memory.pooling.max-pool-size")
    String maxPoolSize() default "64MB";

    /** {@code compute.memory.pooling.release-threshold}: the cached bytes a trim keeps; at most {@link #maxPoolSize()}. */
    @PropertyMapping("memory.pooling.release-threshold")
    String releaseThreshold() default "16MB";

    /** {@code compute.memory.pinning.max-pinned-size}: the cap on reserved {@code PINNED} bytes. */
    @PropertyMapping("memory.pinning.max-pinned-size")
    String maxPinnedSize() default "32MB";

    /** {@code compute.memory.pinning.staging-buffer-size}: the one staging buffer's size; at most {@link #maxPinnedSize()}. */
    @PropertyMapping("memory.pinning.staging-buffer-size")
    String stagingBufferSize() default "4MB";
}
