package dev.compute.boot.actuate;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.boot.ComputeMemoryAutoConfiguration;
import dev.compute.boot.actuate.endpoint.ComputeMemoryEndpoint;
import dev.compute.boot.actuate.endpoint.ComputeMemoryEndpointAutoConfiguration;
import dev.compute.boot.actuate.health.ComputeHealthContributorAutoConfiguration;
import dev.compute.boot.actuate.health.ComputeHealthIndicator;
import dev.compute.boot.actuate.metrics.ComputeMemoryMeterBinder;
import dev.compute.boot.actuate.metrics.ComputeMemoryMetricsAutoConfiguration;
import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import io.micrometer.core.instrument.MeterRegistry;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.springframework.boot.actuate.autoconfigure.endpoint.EndpointAutoConfiguration;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.health.autoconfigure.contributor.HealthContributorAutoConfiguration;
import org.springframework.boot.health.contributor.CompositeHealthContributor;
import org.springframework.boot.health.contributor.HealthContributor;
import org.springframework.boot.health.contributor.HealthContributors;
import org.springframework.boot.health.contributor.HealthIndicator;
import org.springframework.boot.health.contributor.Status;
import org.springframework.boot.micrometer.metrics.autoconfigure.CompositeMeterRegistryAutoConfiguration;
import org.springframework.boot.micrometer.metrics.autoconfigure.MetricsAutoConfiguration;
import org.springframework.boot.micrometer.metrics.autoconfigure.export.simple.SimpleMetricsExportAutoConfiguration;
import org.springframework.boot.test.context.FilteredClassLoader;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/** Which of the endpoint, the health contributor and the meters appear, by class path and property. */
class ComputeActuatorAutoConfigurationTests {

    /** The starter's own auto-configurations: none of them needs Boot's Actuator ones to decide. */
    private final ApplicationContextRunner ours = new ApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(ComputeMemoryAutoConfiguration.class, ComputeMemoryStatisticsAutoConfiguration.class,
                    ComputeMemoryEndpointAutoConfiguration.class, ComputeHealthContributorAutoConfiguration.class,
                    ComputeMemoryMetricsAutoConfiguration.class));

    private final ApplicationContextRunner runner = ours.withConfiguration(AutoConfigurations.of(EndpointAutoConfiguration.class,
            HealthContributorAutoConfiguration.class, MetricsAutoConfiguration.class,
            SimpleMetricsExportAutoConfiguration.class, CompositeMeterRegistryAutoConfiguration.class));

    @Test
    void withEverythingOnTheClassPathTheHealthContributorAndMetersAppearButTheEndpointOnlyWhenExposed() {
        runner.run(context -> {
            assertThat(context).hasSingleBean(UnifiedMemoryManager.class)
                    .hasSingleBean(ComputeHealthIndicator.class)
                    .hasSingleBean(ComputeMemoryMeterBinder.class)
                    .doesNotHaveBean(ComputeMemoryEndpoint.class);
            assertThat(context.getBean(ComputeHealthIndicator.class).health(false).getStatus()).isEqualTo(Status.UP);
            MeterRegistry registry = context.getBean(MeterRegistry.class);
            assertThat(registry.get("compute.memory.reserved").tag("name", "default").tag("backend", "cpu").tag("device", "0").tag("location", "host")
                    .gauge().getId().getBaseUnit()).isEqualTo("bytes");
            assertThat(registry.get("compute.memory.pool.hits").tag("location", "host").functionCounter().count()).isZero();
        });
    }

    @Test
    void computeEnabledFalseTurnsTheWholeStarterOffAndReadsNoOtherSetting() {
        runner.withPropertyValues("compute.enabled=false", "compute.memory.pooling.max-pool-size=-1", "compute.managers.gpu.backend=tpu",
                "management.endpoints.web.exposure.include=computememory").run(context -> assertThat(context).hasNotFailed()
                        .doesNotHaveBean(UnifiedMemoryManager.class).doesNotHaveBean(ObservedManagers.class)
                        .doesNotHaveBean(ComputeHealthIndicator.class).doesNotHaveBean("computeHealthContributor")
                        .doesNotHaveBean(ComputeMemoryMeterBinder.class).doesNotHaveBean(ComputeMemoryEndpoint.class));
    }

    @Test
    void computeEnabledFalseLeavesAManagerOfTheApplicationsOwnUnobserved() {
        runner.withPropertyValues("compute.enabled=false").withBean(UnifiedMemoryManager.class,
                () -> UnifiedMemoryManager.builder().backend("cpu").build(), definition -> definition.setDestroyMethodName("close"))
                .run(context -> assertThat(context).hasSingleBean(UnifiedMemoryManager.class).doesNotHaveBean(ObservedManagers.class)
                        .doesNotHaveBean(ComputeMemoryMeterBinder.class));
    }

    @Test
    void theEndpointTheHealthContributorAndTheMetersReadOneCollectionOfTheFigures() {
        runner.withPropertyValues("management.endpoints.web.exposure.include=computememory")
                .withUserConfiguration(FiguresThatNeverAge.class).run(context -> {
                    assertThat(context).hasSingleBean(ObservedManagers.class);
                    UnifiedMemoryManager manager = context.getBean(UnifiedMemoryManager.class);
                    MeterRegistry registry = context.getBean(MeterRegistry.class);
                    double collected = registry.get("compute.memory.live.buffers").tag("location", "host").gauge().value();
                    try (UnifiedBuffer buffer = manager.allocate(4096, MemoryLocation.HOST)) {
                        assertThat(registry.get("compute.memory.live.buffers").tag("location", "host").gauge().value()).isEqualTo(collected);
                        assertThat(context.getBean(ComputeMemoryEndpoint.class).summary().locations().get(MemoryLocation.HOST).liveBuffers())
                                .isEqualTo((long) collected);
                        assertThat(context.getBean(ComputeHealthIndicator.class).health(true).getDetails().get("locations").toString())
                                .contains("liveBuffers=" + (long) collected);
                        assertThat(manager.statistics(MemoryLocation.HOST).liveBuffers()).as("the manager's own figures are current")
                                .isEqualTo((long) collected + 1);
                    }
                });
    }

    /** Figures collected once and never again: what every reader shows is that one collection. */
    @Configuration(proxyBeanMethods = false)
    static class FiguresThatNeverAge {
        @Bean
        ObservedManagers observedManagers(Map<String, UnifiedMemoryManager> managers, UnifiedMemoryManager primary) {
            return new ObservedManagers(managers, primary, manager -> new RecentMemoryStatistics(manager, Duration.ofSeconds(1), () -> 0L));
        }
    }

    @Test
    void severalManagersAreEachObservedByName() {
        runner.withPropertyValues("management.endpoints.web.exposure.include=computememory",
                "compute.managers.cpu.backend=cpu", "compute.managers.small.backend=cpu",
                "compute.managers.small.memory.pooling.max-pool-size=64MB", "compute.primary=small")
                .withUserConfiguration(OwnManagerBeside.class).run(context -> {
                    assertThat(context).getBeans(UnifiedMemoryManager.class)
                            .containsOnlyKeys("cpuUnifiedMemoryManager", "smallUnifiedMemoryManager", "ownManager");

                    HealthContributor health = context.getBean("computeHealthContributor", HealthContributor.class);
                    assertThat(health).isInstanceOf(CompositeHealthContributor.class);
                    CompositeHealthContributor composite = (CompositeHealthContributor) health;
                    assertThat(composite.stream().map(HealthContributors.Entry::name)).containsExactlyInAnyOrder("cpu", "small", "ownManager");
                    assertThat(((HealthIndicator) composite.getContributor("small")).health(true).getDetails().get("locations").toString())
                            .contains("capBytes=" + (64L << 20));

                    MeterRegistry registry = context.getBean(MeterRegistry.class);
                    assertThat(registry.find("compute.memory.cap").tag("location", "host").gauges())
                            .extracting(gauge -> gauge.getId().getTag("name") + "=" + (long) gauge.value())
                            .containsExactlyInAnyOrder("cpu=" + (4L << 30), "small=" + (64L << 20), "ownManager=" + (4L << 30));

                    ComputeMemoryEndpoint endpoint = context.getBean(ComputeMemoryEndpoint.class);
                    assertThat(endpoint.summary().managers()).containsOnlyKeys("cpu", "small", "ownManager");
                    assertThat(endpoint.summary().primary()).isEqualTo("small");
                });
    }

    /** A manager of the application's own, beside the starter's named ones. */
    @Configuration(proxyBeanMethods = false)
    static class OwnManagerBeside {
        @Bean(destroyMethod = "close")
        UnifiedMemoryManager ownManager() {
            return UnifiedMemoryManager.builder().backend("cpu").timelineInterval(Duration.ZERO).build();
        }
    }

    @Test
    void anAllocationThatFailsIsCountedByItsReasonAndTheMetersGoWithTheContext() {
        MeterRegistry[] registry = new MeterRegistry[1];
        runner.withPropertyValues("compute.memory.pooling.max-pool-size=8MB").run(context -> {
            registry[0] = context.getBean(MeterRegistry.class);
            UnifiedMemoryManager manager = context.getBean(UnifiedMemoryManager.class);
            assertThatThrownBy(() -> manager.allocate(16L << 20, MemoryLocation.HOST)).isInstanceOf(DeviceOutOfMemoryException.class);
            assertThat(registry[0].get("compute.memory.allocation.failures").tags("name", "default", "location", "host", "reason", "pool-limit")
                    .counter().count()).isEqualTo(1);
            manager.allocate(1 << 20, MemoryLocation.HOST).close();
            assertThat(registry[0].get("compute.memory.backend.allocate").tags("name", "default", "location", "host").timer().count()).isPositive();
        });
        assertThat(registry[0].find("compute.memory.reserved").meters()).as("removed when the managers closed with the context").isEmpty();
        assertThat(registry[0].find("compute.memory.allocation.failures").meters()).isEmpty();
    }

    @Test
    void theEndpointAppearsWhenExposedOverTheWebAndGoesWhenItsAccessIsNone() {
        runner.withPropertyValues("management.endpoints.web.exposure.include=computememory")
                .run(context -> assertThat(context).hasSingleBean(ComputeMemoryEndpoint.class));
        runner.withPropertyValues("management.endpoints.web.exposure.include=computememory",
                "management.endpoint.computememory.access=NONE")
                .run(context -> assertThat(context).doesNotHaveBean(ComputeMemoryEndpoint.class));
    }

    @Test
    void theHealthContributorCanBeSwitchedOff() {
        runner.withPropertyValues("management.health.compute.enabled=false")
                .run(context -> assertThat(context).doesNotHaveBean(ComputeHealthIndicator.class).hasSingleBean(UnifiedMemoryManager.class));
    }

    @Test
    void withoutActuatorOrMicrometerOnTheClassPathOnlyTheManagerRemains() {
        ours.withPropertyValues("management.endpoints.web.exposure.include=computememory")
                .withClassLoader(new FilteredClassLoader("org.springframework.boot.actuate", "org.springframework.boot.health", "io.micrometer"))
                .run(context -> assertThat(context).hasNotFailed().hasSingleBean(UnifiedMemoryManager.class)
                        .doesNotHaveBean(ComputeMemoryEndpoint.class)
                        .doesNotHaveBean(ComputeHealthIndicator.class)
                        .doesNotHaveBean(ComputeMemoryMeterBinder.class));
    }

    @Test
    void eachPartFollowsItsOwnClassPath() {
        ours.withPropertyValues("management.endpoints.web.exposure.include=computememory")
                .withClassLoader(new FilteredClassLoader("io.micrometer"))
                .run(context -> assertThat(context).hasSingleBean(ComputeMemoryEndpoint.class)
                        .hasSingleBean(ComputeHealthIndicator.class).doesNotHaveBean(ComputeMemoryMeterBinder.class));
        ours.withPropertyValues("management.endpoints.web.exposure.include=computememory")
                .withClassLoader(new FilteredClassLoader("org.springframework.boot.health"))
                .run(context -> assertThat(context).hasSingleBean(ComputeMemoryEndpoint.class)
                        .doesNotHaveBean(ComputeHealthIndicator.class).hasSingleBean(ComputeMemoryMeterBinder.class));
    }
}
