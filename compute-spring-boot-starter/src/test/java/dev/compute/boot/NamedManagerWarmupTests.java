package dev.compute.boot;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedMemoryManager;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;

/**
 * A named manager's own warm-up (README, "Several managers": each takes every key of compute.*), a list whose elements
 * the binder cuts out of the manager's names (an ArrayIndexOutOfBoundsException at start when those names were made by
 * appending one name to another).
 */
class NamedManagerWarmupTests {

    private final ApplicationContextRunner runner = new ApplicationContextRunner()
            .withConfiguration(AutoConfigurations.of(ComputeMemoryAutoConfiguration.class))
            .withPropertyValues("compute.memory.timeline.interval=0", "compute.memory.pooling.max-pool-size=64MB");

    @Test
    void aNamedManagerWarmsUpWhatItsOwnSettingsSay() {
        runner.withPropertyValues("compute.managers.gpu.backend=cpu", "compute.managers.gpu.memory.pooling.warmup.host[0].size=1MB",
                "compute.managers.gpu.memory.pooling.warmup.host[0].count=2", "compute.managers.cpu.backend=cpu").run(context -> {
                    assertThat(context).hasNotFailed();
                    UnifiedMemoryManager gpu = context.getBean("gpuUnifiedMemoryManager", UnifiedMemoryManager.class);
                    assertThat(gpu.settings().warmup().get(MemoryLocation.HOST)).singleElement().hasToString("2 x 1048576 bytes");
                    assertThat(context.getBean("cpuUnifiedMemoryManager", UnifiedMemoryManager.class).settings().warmup()).isEmpty();
                });
    }

    /** A list is one setting, as Spring Boot overrides lists: the named manager's own warm-up replaces the inherited one whole. */
    @Test
    void aNamedManagersOwnWarmUpReplacesTheInheritedListWhole() {
        runner.withPropertyValues("compute.memory.pooling.warmup.host[0].size=2MB", "compute.memory.pooling.warmup.host[1].size=1MB",
                "compute.memory.pooling.warmup.device[0].size=1MB", "compute.managers.gpu.memory.pooling.warmup.host[0].size=512KB",
                "compute.managers.cpu.backend=cpu").run(context -> {
                    assertThat(context).hasNotFailed();
                    UnifiedMemoryManager gpu = context.getBean("gpuUnifiedMemoryManager", UnifiedMemoryManager.class);
                    assertThat(gpu.settings().warmup().get(MemoryLocation.HOST)).as("its own list, not its first element over the inherited list")
                            .singleElement().hasToString("1 x 524288 bytes");
                    assertThat(gpu.settings().warmup().get(MemoryLocation.DEVICE)).as("a location it does not set is inherited")
                            .singleElement().hasToString("1 x 1048576 bytes");
                    assertThat(context.getBean("cpuUnifiedMemoryManager", UnifiedMemoryManager.class).settings().warmup().get(MemoryLocation.HOST))
                            .hasSize(2);
                });
    }
}
