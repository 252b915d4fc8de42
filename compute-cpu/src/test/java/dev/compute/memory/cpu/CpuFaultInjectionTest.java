package dev.compute.memory.cpu;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.spi.BackendSettings;
import dev.compute.memory.testing.FaultInjectingBackend;
import dev.compute.memory.testing.FaultInjectingBackend.AllocationFault;
import dev.compute.memory.testing.ManagerInvariants;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** Random out-of-memory and driver faults on the real CPU backend: the pool stays whole and frees everything. */
class CpuFaultInjectionTest {

    @Test
    void randomFaultsLeaveThePoolConsistentAndNothingMapped() {
        CpuBackend cpu = (CpuBackend) new CpuBackendProvider().create(BackendSettings.ofDevice(0));
        FaultInjectingBackend faults = new FaultInjectingBackend(cpu, 3);
        Random random = new Random(5);
        int failures = 0;
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(faults)
                .leakDetection(LeakDetectionLevel.PARANOID).timelineInterval(Duration.ZERO).build()) {
            List<UnifiedBuffer> live = new ArrayList<>();
            for (int step = 0; step < 2000; step++) {
                faults.failRandomly(0.03, step % 2 == 0 ? AllocationFault.OUT_OF_MEMORY : AllocationFault.DRIVER_ERROR);
                try {
                    if (live.isEmpty() || random.nextInt(3) > 0 && live.size() < 30) {
                        live.add(manager.allocate(1 + random.nextInt(8 << 20), random.nextBoolean() ? MemoryLocation.DEVICE : MemoryLocation.PINNED));
                    } else {
                        live.remove(random.nextInt(live.size())).close();
                    }
                } catch (FaultInjectingBackend.InjectedFault | DeviceOutOfMemoryException expected) {
                    failures++;
                    assertThat(expected.getMessage()).isNotBlank();
                    faults.failRandomly(0, AllocationFault.DRIVER_ERROR);
                    ManagerInvariants.checkQuiescent(manager);
                }
            }
            faults.failRandomly(0, AllocationFault.DRIVER_ERROR);
            live.forEach(UnifiedBuffer::close);
            ManagerInvariants.checkQuiescent(manager);
            manager.releaseCachedMemory();
            manager.statistics().values().forEach(s -> assertThat(s.reservedBytes()).isZero());
        }
        assertThat(failures).isPositive();
        assertThat(cpu.liveAllocations()).as("every segment freed at close").isZero();
    }
}
