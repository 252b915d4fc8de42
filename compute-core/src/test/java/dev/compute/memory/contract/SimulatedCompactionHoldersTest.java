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
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/** Compaction against a buffer's other holders on the simulated discrete device (host mirrors, plain segments). */
class SimulatedCompactionHoldersTest extends CompactionHoldersContractTest {

    private static final long MiB = 1L << 20;

    @Override
    protected UnifiedMemoryManagerBuilder builder() {
        return UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend()).timelineInterval(Duration.ZERO);
    }

    /**
     * {@link #twoSegmentsWithATwelveMiBHole}, and an out-of-memory handler that compacts and asks for a retry: the
     * allocation that found no room is served. (The manager's own compaction on out-of-memory is off here, or it would
     * make the room before the handler is asked.)
     */
    @Test
    void anOutOfMemoryHandlerThatCompactsMakesRoomForTheAllocation() {
        AtomicReference<UnifiedMemoryManager> self = new AtomicReference<>();
        List<CompactionReport> fromHandler = new ArrayList<>();
        try (UnifiedMemoryManager manager = builder().releaseThreshold(0).maxPoolSize(40 * MiB).compactOnOutOfMemory(false)
                .outOfMemoryHandler((location, requested, attempt, failure) -> {
                    fromHandler.add(self.get().compact(location));
                    return true;
                })
                .build()) {
            self.set(manager);
            List<UnifiedBuffer> buffers = twoSegmentsWithATwelveMiBHole(manager);

            try (UnifiedBuffer served = manager.allocate(13 * MiB, MemoryLocation.DEVICE)) {
                assertThat(served.byteSize()).isEqualTo(13 * MiB);
            }

            assertThat(fromHandler).singleElement().satisfies(report -> {
                assertThat(report.buffersMoved()).isEqualTo(2);
                assertThat(report.bytesReleased()).isEqualTo(20 * MiB);
            });
            buffers.forEach(UnifiedBuffer::close);
        }
    }

    /**
     * Twelve 3 MiB buffers in two 20 MiB segments; the first keeps four, the second two, 12 MiB apart: a 13 MiB
     * request fits nowhere, nor does a new segment for it under a 40 MiB cap. Returns the buffers, some closed.
     */
    private static List<UnifiedBuffer> twoSegmentsWithATwelveMiBHole(UnifiedMemoryManager manager) {
        List<UnifiedBuffer> buffers = new ArrayList<>();
        for (int i = 0; i < 12; i++) {
            buffers.add(manager.allocate(3 * MiB, MemoryLocation.DEVICE));
        }
        for (int i : new int[] {4, 5, 7, 8, 9, 10}) {
            buffers.get(i).close();
        }
        return buffers;
    }

    /**
     * A 13 MiB request waits ({@link #twoSegmentsWithATwelveMiBHole}). Compaction moves the two buffers of the second
     * segment into the first one's holes and gives the second back, which makes room for the request under the cap: the
     * request must be served then, not when some buffer is closed later. (Off here: the manager's own compaction on
     * out-of-memory, which would serve the request at its first try.)
     */
    @Test
    void aRequestWaitingForMemoryIsServedOnceACompactionMadeRoom() throws Exception {
        try (UnifiedMemoryManager manager = builder().releaseThreshold(0).maxPoolSize(40 * MiB).compactOnOutOfMemory(false).build()) {
            List<UnifiedBuffer> buffers = twoSegmentsWithATwelveMiBHole(manager);
            CompletableFuture<UnifiedBuffer> waiting = manager.allocateAsync(13 * MiB, MemoryLocation.DEVICE, Duration.ofMinutes(2));
            assertThat(waiting).as("no room under the cap before the compaction").isNotDone();

            CompactionReport report = manager.compact(MemoryLocation.DEVICE);

            assertThat(report.buffersMoved()).isEqualTo(2);
            try (UnifiedBuffer served = waiting.get(30, TimeUnit.SECONDS)) {
                assertThat(served.byteSize()).isEqualTo(13 * MiB);
            }
            buffers.forEach(UnifiedBuffer::close);
        }
    }
}
