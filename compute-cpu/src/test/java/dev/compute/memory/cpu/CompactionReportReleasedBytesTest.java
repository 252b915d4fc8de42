package dev.compute.memory.cpu;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.CompactionReport;
import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * On expandable segments, after a trim gave free pages back, a move may map pages at its new place and unmap more at
 * its old one: the pool reserves less. The report's bytesReleased must count that, as its reserved figures do.
 */
class CompactionReportReleasedBytesTest {

    @Test
    void bytesReleasedIsWhatTheCompactionGaveBackMovesIncluded() {
        Random random = new Random(7);
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend("cpu").maxPoolSize(256L << 20).releaseThreshold(0)
                .timelineInterval(Duration.ZERO).trimInterval(Duration.ZERO).leakDetection(LeakDetectionLevel.DISABLED).build()) {
            boolean movesGaveBack = false;
            for (int round = 0; round < 6; round++) {
                List<UnifiedBuffer> live = new ArrayList<>();
                for (int i = 0; i < 40; i++) {
                    UnifiedBuffer buffer = manager.allocate((2L << 20) + random.nextInt(3 << 20), MemoryLocation.HOST);
                    byte[] bytes = new byte[(int) buffer.byteSize()];
                    Arrays.fill(bytes, (byte) i);
                    buffer.copyFrom(bytes);
                    live.add(buffer);
                }
                Collections.shuffle(live, random);
                for (int i = 0; i < 30; i++) {
                    live.remove(0).close();
                }
                if (round % 3 == 1) {
                    manager.trim(); // free pages go back: a move may now map pages where it unmaps more
                }
                CompactionReport report = manager.compact(MemoryLocation.HOST);
                assertThat(report.bytesReleased()).as("round %d: %s", round, report)
                        .isEqualTo(report.reservedBytesBefore() - report.reservedBytesAfter());
                movesGaveBack |= report.buffersMoved() > 0 && report.bytesReleased() > 0;
                live.forEach(UnifiedBuffer::close);
            }
            assertThat(movesGaveBack).isTrue();
        }
    }
}
