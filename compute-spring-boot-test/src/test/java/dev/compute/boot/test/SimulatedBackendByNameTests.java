package dev.compute.boot.test;

import static dev.compute.boot.test.ComputeMemoryAssertions.assertThat;
import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.DataType;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemoryStatistics;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Configuration;

/** {@code backend = "simulated"}: device memory the host cannot address, so a test sees every copy its code makes. */
@SpringBootTest(classes = SimulatedBackendByNameTests.NoAutoConfiguration.class)
@AutoConfigureComputeMemory(backend = "simulated")
class SimulatedBackendByNameTests {

    @Autowired
    UnifiedMemoryManager manager;

    @Test
    void theManagerRunsOnTheSimulatedDiscreteDevice() {
        assertThat(manager.backendInfo().backend()).isEqualTo("simulated");
        assertThat(manager.defaultLocation()).isEqualTo(MemoryLocation.DEVICE);
    }

    @Test
    void syncsBetweenHostAndDeviceAreCopiesATestCanCount() {
        MemoryStatistics before = manager.statistics(MemoryLocation.DEVICE);
        try (UnifiedBuffer buffer = manager.allocate(DataType.FLOAT32, 1024)) {
            buffer.copyFrom(new float[1024]);
            manager.ops().scale(buffer, 2.0);
            buffer.copyTo(new float[1024]);
        }
        MemoryStatistics after = manager.statistics(MemoryLocation.DEVICE);
        assertThat(after.bytesHostToDevice() - before.bytesHostToDevice()).as("the array in; the op ran where the data was").isEqualTo(4096);
        assertThat(after.bytesDeviceToHost() - before.bytesDeviceToHost()).as("the result out").isEqualTo(4096);
        assertThat(manager).hasNoOpenBuffers();
    }

    @Configuration(proxyBeanMethods = false)
    static class NoAutoConfiguration {}
}
