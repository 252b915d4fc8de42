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
 * Gives a test's application context a {@link dev.compute.memory.UnifiedMemoryManager} of its own that the
 * application's settings cannot break, as {@code @AutoConfigureTestDatabase} replaces a production
 * {@code DataSource}: on the CPU backend (there on every machine), leak detection {@code paranoid} (every buffer
 * tracked, with the stack it was allocated from) and a small pool, so a runaway allocation fails at once rather than
 * taking the machine's memory.
 *
 * <p>The test's manager reads its settings from {@code spring.test.compute.*} alone, which has the keys of one manager
 * of {@code compute.*} ({@code backend}, {@code device}, {@code opencl.*}, {@code backend-options.*}, {@code memory.*},
 * {@code budgets.*}): nothing under {@code compute.*} reaches it (a production warm-up, a GPU backend, named managers'
 * settings). This annotation's attributes set the most common ones; set any other with the test's properties, as
 * {@code @SpringBootTest(properties = "spring.test.compute.memory.pooling.warmup.host[0].size=1MB")}. An attribute left
 * at its default sets nothing: its default is below every property source, so the test's properties (a test
 * {@code application.yml} shared by every test class) set that key too; an attribute given on the annotation with a
 * value other than its default wins (Spring Boot skips a default, written or not). A bad one, or a key no setting has
 * (a typo), stops the context naming the {@code spring.test.compute.*} property and where it was set. With {@link #replace()}
 * {@link Replace#ANY} (the default) every manager bean is replaced, each keeping its bean name, qualifier and primary
 * flag ({@code compute.managers.gpu} stays {@code @Qualifier("gpu")}, now a test manager); {@link Replace#NONE} keeps
 * the application's own managers and settings.
 *
 * <p>Slice tests ({@code @WebMvcTest}, {@code @JsonTest}, ...) leave the starter's auto-configuration out; this
 * imports it, as Spring Boot's own {@code @AutoConfigure...} annotations import theirs (the list is
 * {@code META-INF/spring/dev.compute.boot.test.AutoConfigureComputeMemory.imports}). Pair it with
 * {@link ComputeMemoryExtension} to fail a test that leaves buffers open, or use {@link ComputeMemoryTest}, which does
 * both for a test of services alone.
 */
@Target(ElementType.TYPE)
@Retention(RetentionPolicy.RUNTIME)
@Documented
@Inherited
@ImportAutoConfiguration
@PropertyMapping(AutoConfigureComputeMemory.PREFIX)
public @interface AutoConfigureComputeMemory {

    /** Where the test's manager reads its settings: {@value}, with the keys of {@code compute.*}. */
    String PREFIX = "spring.test.compute";

    /** Which managers of the application the test's manager replaces. */
    @PropertyMapping(skip = PropertyMapping.Skip.ON_DEFAULT_VALUE)
    Replace replace() default Replace.ANY;

    /**
     * {@code spring.test.compute.backend}: {@code cpu}, there on every machine; {@code simulated}, a discrete device in
     * software (memory the host cannot address, so buffers copy and sync as on a GPU); or any backend on the class path.
     */
    @PropertyMapping(skip = PropertyMapping.Skip.ON_DEFAULT_VALUE)
    String backend() default "cpu";

    /** {@code spring.test.compute.memory.leak-detection}: {@code PARANOID} records where every buffer was allocated. */
    @PropertyMapping(value = "memory.leak-detection", skip = PropertyMapping.Skip.ON_DEFAULT_VALUE)
    LeakDetectionLevel leakDetection() default LeakDetectionLevel.PARANOID;

    /** {@code spring.test.compute.memory.pooling.max-pool-size}: the cap on reserved bytes per location. */
    @PropertyMapping(value = "memory.pooling.max-pool-size", skip = PropertyMapping.Skip.ON_DEFAULT_VALUE)
    String maxPoolSize() default "64MB";

    /** {@code spring.test.compute.memory.pooling.release-threshold}: the cached bytes a trim keeps; at most {@link #maxPoolSize()}. */
    @PropertyMapping(value = "memory.pooling.release-threshold", skip = PropertyMapping.Skip.ON_DEFAULT_VALUE)
    String releaseThreshold() default "16MB";

    /** {@code spring.test.compute.memory.pinning.max-pinned-size}: the cap on reserved {@code PINNED} bytes. */
    @PropertyMapping(value = "memory.pinning.max-pinned-size", skip = PropertyMapping.Skip.ON_DEFAULT_VALUE)
    String maxPinnedSize() default "32MB";

    /** {@code spring.test.compute.memory.pinning.staging-buffer-size}: the one staging buffer's size; at most {@link #maxPinnedSize()}. */
    @PropertyMapping(value = "memory.pinning.staging-buffer-size", skip = PropertyMapping.Skip.ON_DEFAULT_VALUE)
    String stagingBufferSize() default "4MB";

    /** Which managers a test's manager replaces. */
    enum Replace {

        /** Every {@code UnifiedMemoryManager} bean, the application's own as well as the starter's. */
        ANY,

        /** Only the managers the starter builds from {@code compute.*} and {@code compute.managers.*}. */
        AUTO_CONFIGURED,

        /** None: the application's managers, with their own settings ({@code compute.*}). */
        NONE
    }
}
