package dev.compute.boot.actuate;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import java.util.LinkedHashMap;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

class ObservedManagersTests {

    private final UnifiedMemoryManager first = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend()).build();
    private final UnifiedMemoryManager second = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend()).build();

    @AfterEach
    void close() {
        first.close();
        second.close();
    }

    @Test
    void aManagerIsNamedByItsBeanNameLessTheSuffix() {
        assertThat(ObservedManagers.nameOf("gpuUnifiedMemoryManager")).isEqualTo("gpu");
        assertThat(ObservedManagers.nameOf("tenant-aUnifiedMemoryManager")).isEqualTo("tenant-a");
        assertThat(ObservedManagers.nameOf("unifiedMemoryManager")).as("the one manager of compute.*").isEqualTo("default");
        assertThat(ObservedManagers.nameOf("scratch")).isEqualTo("scratch");
        assertThat(ObservedManagers.nameOf("Manager")).isEqualTo("Manager");
    }

    @Test
    void eachManagerHasItsNameItsOwnRecentFiguresAndTheBeansOrder() {
        Map<String, UnifiedMemoryManager> beans = new LinkedHashMap<>();
        beans.put("zUnifiedMemoryManager", first);
        beans.put("aUnifiedMemoryManager", second);
        ObservedManagers managers = new ObservedManagers(beans, second);
        assertThat(managers.byName()).containsOnlyKeys("z", "a");
        assertThat(managers.all()).extracting(ObservedManagers.ObservedManager::name).containsExactly("z", "a");
        assertThat(managers.primary()).hasValueSatisfying(primary -> assertThat(primary.manager()).isSameAs(second));
        assertThat(managers.get("z").orElseThrow().statistics()).isNotSameAs(managers.get("a").orElseThrow().statistics());
        assertThat(managers.get("b")).isEmpty();
        assertThat(new ObservedManagers(beans, null).primary()).as("several, none primary").isEmpty();
    }

    @Test
    void twoBeansObservedByOneNameStopStartUpNamingBoth() {
        Map<String, UnifiedMemoryManager> beans = new LinkedHashMap<>();
        beans.put("gpu", first);
        beans.put("gpuUnifiedMemoryManager", second);
        assertThatThrownBy(() -> new ObservedManagers(beans, first)).isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("'gpu' and 'gpuUnifiedMemoryManager' are both observed as 'gpu'");
    }
}
