package dev.compute.boot.actuate.metrics;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.boot.ComputeMemoryAutoConfiguration;
import dev.compute.boot.actuate.ComputeMemoryStatisticsAutoConfiguration;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.micrometer.metrics.autoconfigure.MetricsAutoConfiguration;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.core.NestedExceptionUtils;

/** Two application contexts, one MeterRegistry: a parent and its child, or two contexts given the same registry. */
class SharedMeterRegistryTests {

    private final SimpleMeterRegistry shared = new SimpleMeterRegistry();

    private final ApplicationContextRunner runner = new ApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(ComputeMemoryAutoConfiguration.class, ComputeMemoryStatisticsAutoConfiguration.class,
                    ComputeMemoryMetricsAutoConfiguration.class, MetricsAutoConfiguration.class))
            .withPropertyValues("compute.backend=cpu", "compute.memory.timeline.interval=0")
            .withBean("meterRegistry", MeterRegistry.class, () -> shared);

    private double allocatedAtHost(String name) {
        return shared.get("compute.memory.allocated").tags("name", name, "location", "host").gauge().value();
    }

    /**
     * Two contexts given one registry each make a manager named {@code default}: the second's meters would be the
     * first's (Micrometer keeps one meter per id), reading the first's manager, and gone when the first context closes.
     * The second stops at start saying so.
     */
    @Test
    void aSecondContextWhoseManagerWouldTakeOverTheMetersOfAnotherStopsAtStart() {
        runner.run(first -> {
            runner.run(second -> assertThat(NestedExceptionUtils.getMostSpecificCause(second.getStartupFailure())).isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("already has the compute meters of a manager named 'default' (backend cpu, device 0)")
                    .hasMessageContaining("Give each context its own MeterRegistry"));
            UnifiedMemoryManager manager = first.getBean(UnifiedMemoryManager.class);
            try (UnifiedBuffer buffer = manager.allocate(4096, MemoryLocation.HOST)) {
                assertThat(allocatedAtHost("default")).as("the first's meters read the first's manager").isEqualTo(4096);
            }
            first.close();
            assertThat(shared.find("compute.memory.allocated").gauges()).as("removed with the first context").isEmpty();
        });
    }

    /** A child context uses its parent's manager, meters and registry: none is registered twice, and the child's close leaves them. */
    @Test
    void aChildContextSharesItsParentsMetersAndItsCloseLeavesThem() {
        runner.run(parent -> new ApplicationContextRunner().withParent(parent)
                .withConfiguration(AutoConfigurations.of(ComputeMemoryAutoConfiguration.class, ComputeMemoryStatisticsAutoConfiguration.class,
                        ComputeMemoryMetricsAutoConfiguration.class, MetricsAutoConfiguration.class))
                .withPropertyValues("compute.backend=cpu")
                .run(child -> {
                    assertThat(child).hasNotFailed();
                    assertThat(child.getBeanFactory().getBeanNamesForType(UnifiedMemoryManager.class)).as("the parent's, not one of its own").isEmpty();
                    assertThat(shared.find("compute.memory.allocated").tags("location", "host").gauges()).hasSize(1);
                    child.close();
                    try (UnifiedBuffer buffer = parent.getBean(UnifiedMemoryManager.class).allocate(4096, MemoryLocation.HOST)) {
                        assertThat(allocatedAtHost("default")).isEqualTo(4096);
                    }
                }));
    }
}
