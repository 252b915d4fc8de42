package dev.compute.boot;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.PoolSize;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.boot.context.properties.source.ConfigurationPropertyName;
import org.springframework.core.env.MapPropertySource;
import org.springframework.core.env.StandardEnvironment;
import org.springframework.util.unit.DataSize;

class NamedManagerPropertySourceTests {

    private final StandardEnvironment environment = new StandardEnvironment();

    private void set(String source, Map<String, Object> properties) {
        environment.getPropertySources().addLast(new MapPropertySource(source, properties));
    }

    private ManagerProperties bind(String name) {
        return new Binder(List.of(new NamedManagerPropertySource(environment, name)), null, PoolSizeConverter.conversionService()).bindOrCreate("compute", ManagerProperties.class);
    }

    @Test
    void aNamedManagerHasItsOwnValuesAndInheritsTheRestWithTheDefaultsBelowBoth() {
        set("application", Map.of("compute.backend", "cpu", "compute.memory.leak-detection", "paranoid",
                "compute.memory.pooling.max-pool-size", "1GB", "compute.managers.gpu.backend", "opencl",
                "compute.managers.gpu.memory.pooling.max-pool-size", "2GB", "compute.managers.gpu.device", "1"));

        ManagerProperties gpu = bind("gpu");
        assertThat(gpu.backend()).isEqualTo("opencl");
        assertThat(gpu.device()).isEqualTo(1);
        assertThat(gpu.memory().pooling().maxPoolSize()).isEqualTo(PoolSize.ofBytes(DataSize.ofGigabytes(2).toBytes()));
        assertThat(gpu.memory().leakDetection()).as("inherited").hasToString("PARANOID");
        assertThat(gpu.memory().pinning().maxPinnedSize()).as("the default").isEqualTo(DataSize.ofGigabytes(2));

        ManagerProperties cpu = bind("cpu");
        assertThat(cpu.backend()).as("all of compute.*").isEqualTo("cpu");
        assertThat(cpu.memory().pooling().maxPoolSize()).isEqualTo(PoolSize.ofBytes(DataSize.ofGigabytes(1).toBytes()));
    }

    @Test
    void aNamedValueWinsWhicheverSourceEitherComesFrom() {
        set("command line", Map.of("compute.memory.pooling.max-pool-size", "1GB"));
        set("application.yml", Map.of("compute.managers.gpu.memory.pooling.max-pool-size", "3GB"));
        assertThat(bind("gpu").memory().pooling().maxPoolSize()).isEqualTo(PoolSize.ofBytes(DataSize.ofGigabytes(3).toBytes()));
    }

    @Test
    void backendOptionsAreInheritedKeyByKey() {
        set("application", Map.of("compute.backend-options.page-size", "64KB", "compute.backend-options.pinned-fallback", "fail",
                "compute.managers.gpu.backend-options.pinned-fallback", "unlocked", "compute.managers.gpu.backend-options.streams", "8"));
        assertThat(bind("gpu").backendOptions())
                .containsExactlyInAnyOrderEntriesOf(Map.of("page-size", "64KB", "pinned-fallback", "unlocked", "streams", "8"));
        assertThat(bind("cpu").backendOptions()).containsExactlyInAnyOrderEntriesOf(Map.of("page-size", "64KB", "pinned-fallback", "fail"));
    }

    @Test
    void aSettingIsNamedWhereItIsSetOrElseWhereToSetIt() {
        set("application", Map.of("compute.memory.pooling.max-pool-size", "1GB", "compute.managers.gpu.memory.leak-detection", "paranoid"));
        NamedManagerPropertySource gpu = new NamedManagerPropertySource(environment, "gpu");
        assertThat(gpu.whereSet("compute.memory.leak-detection")).isEqualTo("compute.managers.gpu.memory.leak-detection");
        assertThat(gpu.whereSet("compute.memory.pooling.max-pool-size")).as("inherited").isEqualTo("compute.memory.pooling.max-pool-size");
        assertThat(gpu.whereSet("compute.memory.pooling.release-threshold")).as("a default")
                .isEqualTo("compute.managers.gpu.memory.pooling.release-threshold");
        assertThat(gpu.whereSet("page-size (an option of the cpu backend)")).as("not a property name").isEqualTo("page-size (an option of the cpu backend)");
    }

    @Test
    void onlyManagerSettingsAreSeenAndUnderTheirComputeNames() {
        set("application", Map.of("compute.managers.gpu.backend", "opencl", "compute.managers.cpu.backend", "cpu",
                "compute.health.cap-warning-threshold", "0.5", "compute.memory.leak-detection", "simple"));
        NamedManagerPropertySource gpu = new NamedManagerPropertySource(environment, "gpu");
        assertThat(gpu.stream().map(ConfigurationPropertyName::toString))
                .containsExactlyInAnyOrder("compute.backend", "compute.health.cap-warning-threshold", "compute.memory.leak-detection");
        assertThat(gpu.getConfigurationProperty(ConfigurationPropertyName.of("compute.managers.cpu.backend"))).isNull();
        assertThat(gpu.getConfigurationProperty(ConfigurationPropertyName.of("compute.backend")).getName())
                .as("the property keeps its real name").hasToString("compute.managers.gpu.backend");
    }
}
