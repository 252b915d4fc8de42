package dev.compute.memory;

import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/** A manager on the simulated device with a 64 MiB cap and no background work, and a way to fill its DEVICE pool. */
final class SmallSimulatedPools {

    static final long MiB = 1L << 20;

    private SmallSimulatedPools() {}

    static UnifiedMemoryManagerBuilder builder() {
        return UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend()).timelineInterval(Duration.ZERO)
                .trimInterval(Duration.ZERO).maxPoolSize(64 * MiB);
    }

    /** Buffers of {@code size} bytes until the DEVICE pool refuses one; the caller closes them. */
    static List<UnifiedBuffer> fill(UnifiedMemoryManager manager, long size) {
        List<UnifiedBuffer> held = new ArrayList<>();
        for (Optional<UnifiedBuffer> next; (next = manager.tryAllocate(size, MemoryLocation.DEVICE)).isPresent(); ) {
            held.add(next.get());
        }
        return held;
    }
}
