package dev.compute.boot.test;

import dev.compute.memory.LeakDetectionLevel;
import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Inherited;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.autoconfigure.ImportAutoConfiguration;
import org.springframework.boot.test.autoconfigure.OverrideAutoConfiguration;
import org.springframework.boot.test.context.filter.annotation.TypeExcludeFilters;
import org.springframework.context.annotation.ComponentScan.Filter;
import org.springframework.core.annotation.AliasFor;
import org.springframework.test.context.BootstrapWith;
import org.springframework.test.context.junit.jupiter.SpringExtension;

/**
 * A test of the code that uses compute memory, and of nothing else, as {@code @JsonTest} is for JSON: an application
 * context with the starter's manager set up for tests ({@link AutoConfigureComputeMemory}: CPU backend, leak
 * detection {@code paranoid}, a small pool, whatever the application's {@code compute.*} says), no other
 * auto-configuration and none of the application's components unless the test includes them (an {@code @Import} of
 * the service under test, or {@link #includeFilters()}); and {@link ComputeMemoryExtension}, which fails a test that
 * leaves buffers open.
 *
 * <pre>{@code
 * @ComputeMemoryTest
 * @Import(Scorer.class)
 * class ScorerTests {
 *     @Autowired Scorer scorer;
 *     @Test void scores() { assertThat(scorer.score(new float[] {1}, new float[] {2})).isEqualTo(3.0); }
 * }
 * }</pre>
 */
@Target(ElementType.TYPE)
@Retention(RetentionPolicy.RUNTIME)
@Documented
@Inherited
@BootstrapWith(ComputeMemoryTestContextBootstrapper.class)
@ExtendWith({SpringExtension.class, ComputeMemoryExtension.class})
@OverrideAutoConfiguration(enabled = false)
@TypeExcludeFilters(ComputeMemoryTypeExcludeFilter.class)
@AutoConfigureComputeMemory
@ImportAutoConfiguration
public @interface ComputeMemoryTest {

    /** Properties in the form {@code key=value} added to the test's environment, such as {@code spring.test.compute.*}. */
    String[] properties() default {};

    /** The test manager's backend: {@link AutoConfigureComputeMemory#backend()}. */
    @AliasFor(annotation = AutoConfigureComputeMemory.class)
    String backend() default "cpu";

    /** The test manager's leak detection: {@link AutoConfigureComputeMemory#leakDetection()}. */
    @AliasFor(annotation = AutoConfigureComputeMemory.class)
    LeakDetectionLevel leakDetection() default LeakDetectionLevel.PARANOID;

    /** The test manager's cap: {@link AutoConfigureComputeMemory#maxPoolSize()}. */
    @AliasFor(annotation = AutoConfigureComputeMemory.class)
    String maxPoolSize() default "64MB";

    /** The test manager's release threshold: {@link AutoConfigureComputeMemory#releaseThreshold()}. */
    @AliasFor(annotation = AutoConfigureComputeMemory.class)
    String releaseThreshold() default "16MB";

    /** Whether the scan uses this slice's default filters, which include none of the application's components. */
    boolean useDefaultFilters() default true;

    /** Which of the application's components the scan includes, beside those the test imports. */
    Filter[] includeFilters() default {};

    /** Which of the application's components the scan leaves out. */
    Filter[] excludeFilters() default {};

    /** Auto-configurations to leave out. */
    @AliasFor(annotation = ImportAutoConfiguration.class, attribute = "exclude")
    Class<?>[] excludeAutoConfiguration() default {};
}
