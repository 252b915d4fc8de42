package dev.compute.memory.contract;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.CompactionReport;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.UnifiedMemoryManagerBuilder;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** Compaction against a buffer's other holders on the simulated discrete device (host mirrors, plain segments). */
class SimulatedCompactionHoldersTest extends CompactionHoldersContractTest {

    private static final long MiB = 1L << 20;

    @Override
    protected UnifiedMemoryManagerBuilder builder() {
        return UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend()).timelineInterval(Duration.ZERO);
    }

    /**
     * Two 20 MiB segments under a 40 MiB cap, the first holding four 3 MiB buffers and the second two, 12 MiB apart: a
     * 13 MiB request waits. Compaction moves the two into the first segment's holes and gives the second back, which makes room for
     * the request under the cap: the request must be served then, not when some buffer is closed later.
     */
    @Test
    void aRequestWaitingForMemoryIsServedOnceACompactionMadeRoom() throws Exception {
        try (UnifiedMemoryManager manager = builder().releaseThreshold(0).maxPoolSize(40 * MiB).build()) {
            List<UnifiedBuffer> buffers = new ArrayList<>();
            for (int i = 0; i < 12; i++) {
                buffers.add(manager.allocate(3 * MiB, MemoryLocation.DEVICE));
            }
            for (int i : new int[] {4, 5, 7, 8, 9, 10}) {
                buffers.get(i).close();
            }
            CompletableFuture<UnifiedBuffer> waiting = manager.allocateAsync(13 * MiB, MemoryLocation.DEVICE, Duration.ofMinutes(2));
            assertThat(waiting).as("no room under the cap before the compaction").isNotDone();

            CompactionReport report = manager.compact(MemoryLocation.DEVICE);

            assertThat(report.buffersMoved()).isEqualTo(2);
            assertThat(report.bytesReleased()).isEqualTo(20 * MiB);
            try (UnifiedBuffer served = waiting.get(30, TimeUnit.SECONDS)) {
                assertThat(served.byteSize()).isEqualTo(13 * MiB);
            }
            buffers.forEach(UnifiedBuffer::close);
        }
    }
}
