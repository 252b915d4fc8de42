package dev.compute.boot.test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Configuration;

/**
 * A context without auto-configuration, as a slice test's is: the annotation alone brings the manager, on the CPU,
 * tracking every buffer's allocation site, with a small pool, whatever the application's own settings say (here,
 * those of a production service on a GPU, whose release threshold and staging buffer are above the test's caps).
 */
@SpringBootTest(classes = AutoConfigureComputeMemoryTests.NoAutoConfiguration.class, properties = {"compute.backend=opencl",
        "compute.memory.pooling.max-pool-size=8GB", "compute.memory.pooling.release-threshold=1GB",
        "compute.memory.pinning.max-pinned-size=2GB", "compute.memory.pinning.staging-buffer-size=256MB"})
@AutoConfigureComputeMemory
class AutoConfigureComputeMemoryTests {

    @Autowired
    UnifiedMemoryManager manager;

    @Test
    void aContextWithoutAutoConfigurationGetsTheManagerOnTheCpu() {
        assertThat(manager.backendInfo().backend()).as("the annotation's setting wins over the test's own").isEqualTo("cpu");
    }

    @Test
    void everyBufferHasItsAllocationSite() {
        try (UnifiedBuffer buffer = manager.allocate(4096)) {
            assertThat(manager.liveBuffers()).singleElement().satisfies(live -> assertThat(live.allocationSite())
                    .contains("AutoConfigureComputeMemoryTests.everyBufferHasItsAllocationSite"));
        }
    }

    @Test
    void thePoolIsSmallSoARunawayAllocationFailsAtOnce() {
        assertThatThrownBy(() -> manager.allocate(65L << 20)).isInstanceOf(DeviceOutOfMemoryException.class)
                .hasMessageContaining("above compute.memory.pooling.max-pool-size (67108864 bytes)");
    }

    @Configuration(proxyBeanMethods = false)
    static class NoAutoConfiguration {}
}
