package dev.compute.memory;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Free memory in a budget's reservation is kept for that budget's requests: it is cached, but it is no free block
 * another request can take, nor fragmentation. The largest free block read 20 MiB (and compaction reported the
 * fragmentation it "removed") while a request outside the budget of that size needed a call to the backend.
 */
class ReservationFiguresTest {

    private static final long MIB = 1L << 20;

    @Test
    void aReservationsFreeMemoryIsCachedForItAloneNotTheLargestFreeBlock() {
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend())
                .timelineInterval(Duration.ZERO).trimInterval(Duration.ZERO).maxPoolSize(64 * MIB).build();
             MemoryBudget reserved = manager.budget(BudgetSpec.of("reserved", 32 * MIB).withReservation(MemoryLocation.DEVICE, 32 * MIB))) {
            List<UnifiedBuffer> mine = new ArrayList<>();
            for (int i = 0; i < 24; i++) {
                mine.add(reserved.allocate(MIB + 4096, MemoryLocation.DEVICE));
            }
            for (int i = 0; i < mine.size(); i += 2) {
                mine.get(i).close();
            }
            CompactionReport report = manager.compact().getFirst();
            assertThat(report.largestFreeBlockBytesAfter()).as("no free block outside the reservation").isZero();
            assertThat(report.fragmentationBefore()).isZero();
            assertThat(report.fragmentationAfter()).isZero();

            MemoryStatistics figures = manager.statistics(MemoryLocation.DEVICE);
            assertThat(figures.cachedBytes()).as("the reservation's arenas hold free memory").isGreaterThan(12 * MIB);
            assertThat(figures.reservationsCachedBytes()).isEqualTo(figures.cachedBytes());
            assertThat(figures.largestFreeBlockBytes()).isZero();
            assertThat(figures.fragmentation()).isZero();

            long calls = figures.backendAllocations();
            try (UnifiedBuffer outside = manager.allocate(4 * MIB, MemoryLocation.DEVICE)) {
                assertThat(manager.statistics(MemoryLocation.DEVICE).backendAllocations()).as("the reservation's memory is not lent")
                        .isEqualTo(calls + 1);
            }
            MemoryStatistics after = manager.statistics(MemoryLocation.DEVICE);
            assertThat(after.largestFreeBlockBytes()).as("what the outside request freed").isGreaterThanOrEqualTo(4 * MIB);
            // (the outside request's out-of-memory retry gave back the reservation's empty segment to make room for it)
            assertThat(after.reservationsCachedBytes()).isPositive();
            assertThat(after.cachedBytes()).as("one free block outside").isEqualTo(after.reservationsCachedBytes() + after.largestFreeBlockBytes());
            assertThat(after.fragmentation()).isZero();
            try (UnifiedBuffer again = manager.allocate(after.largestFreeBlockBytes(), MemoryLocation.DEVICE)) {
                assertThat(manager.statistics(MemoryLocation.DEVICE).backendAllocations()).as("the largest free block, taken as it is")
                        .isEqualTo(after.backendAllocations());
            }

            assertThatThrownBy(() -> manager.allocate(60 * MIB, MemoryLocation.DEVICE)).isInstanceOf(DeviceOutOfMemoryException.class)
                    .hasMessageContaining("largest free block 0 bytes outside the reservations' arenas, ") // after the retry's release
                    .hasMessageMatching("(?s).*reservations' arenas, [1-9][0-9]* bytes within them.*");
            mine.forEach(UnifiedBuffer::close);
        }
    }
}
