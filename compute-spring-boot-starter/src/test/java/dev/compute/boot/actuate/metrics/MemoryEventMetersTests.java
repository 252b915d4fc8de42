package dev.compute.boot.actuate.metrics;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.OutOfMemoryReason;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.util.EnumSet;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** The event meters on a real manager's events: what fails, by reason; backend calls and out-of-memory recovery, timed. */
class MemoryEventMetersTests {

    private final SimpleMeterRegistry registry = new SimpleMeterRegistry();
    private final MemoryEventMeters meters = new MemoryEventMeters(registry, Tags.of("name", "gpu"), EnumSet.allOf(MemoryLocation.class));

    @AfterEach
    void close() {
        registry.close();
    }

    @Test
    void everySeriesIsThereAtZeroBeforeItsFirstEvent() {
        assertThat(registry.find("compute.memory.allocation.failures").counters())
                .hasSize(MemoryLocation.values().length * OutOfMemoryReason.values().length)
                .allSatisfy(counter -> assertThat(counter.count()).isZero());
        assertThat(registry.get("compute.memory.allocation.failures").tags("name", "gpu", "location", "pinned", "reason", "device-work-stuck")
                .counter().count()).isZero();
        assertThat(registry.find("compute.memory.oom.recovery").timers()).extracting(timer -> timer.getId().getTag("outcome"))
                .containsOnly("recovered", "failed");
        assertThat(meters.meters()).hasSize(registry.getMeters().size());
    }

    @Test
    void backendCallsAreTimedAndAFailureIsCountedByItsReason() {
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend(64L << 20))
                .maxPoolSize(8L << 20).releaseThreshold(0).pinningEnabled(false).eventListener(meters).build()) {
            manager.allocate(1 << 20, MemoryLocation.DEVICE).close();
            assertThat(registry.get("compute.memory.backend.allocate").tag("location", "device").timer().count()).isEqualTo(1);
            manager.trim();
            assertThat(registry.get("compute.memory.backend.free").tag("location", "device").timer().count()).isEqualTo(1);

            assertThatThrownBy(() -> manager.allocate(16L << 20, MemoryLocation.DEVICE)).isInstanceOf(DeviceOutOfMemoryException.class);
            assertThat(registry.get("compute.memory.allocation.failures").tags("location", "device", "reason", "pool-limit").counter().count())
                    .isEqualTo(1);
            assertThat(registry.get("compute.memory.allocation.failures").tags("location", "host", "reason", "pool-limit").counter().count())
                    .isZero();
        }
    }

    @Test
    void outOfDeviceMemoryTheRecoveryIsTimedWithItsOutcome() {
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend(8L << 20))
                .pinningEnabled(false).eventListener(meters).build();
                UnifiedBuffer held = manager.allocate(6L << 20, MemoryLocation.DEVICE)) {
            assertThatThrownBy(() -> manager.allocate(6L << 20, MemoryLocation.DEVICE)).isInstanceOf(DeviceOutOfMemoryException.class);
            assertThat(registry.get("compute.memory.oom.recovery").tags("location", "device", "outcome", "failed").timer().count())
                    .as("one record per step: the pool's release of its cache, then the compaction").isEqualTo(2);
            assertThatThrownBy(() -> manager.allocate(6L << 20, MemoryLocation.DEVICE)).isInstanceOf(DeviceOutOfMemoryException.class);
            assertThat(registry.get("compute.memory.oom.recovery").tags("location", "device", "outcome", "failed").timer().count())
                    .as("again, the compaction declining: nothing changed since one made no room").isEqualTo(4);
            assertThat(registry.get("compute.memory.allocation.failures").tags("location", "device", "reason", "device-memory").counter().count())
                    .as("one for each allocation that failed").isEqualTo(2);
        }
    }
}
