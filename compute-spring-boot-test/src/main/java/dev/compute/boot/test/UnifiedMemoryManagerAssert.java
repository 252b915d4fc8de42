package dev.compute.boot.test;

import dev.compute.memory.LiveBufferReport;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemoryStatistics;
import dev.compute.memory.UnifiedMemoryManager;
import java.util.List;
import org.assertj.core.api.AbstractAssert;
import org.assertj.core.api.Assertions;
import org.assertj.core.api.ObjectAssert;

/**
 * Assertions on a {@link UnifiedMemoryManager}: its open buffers, its figures per location and the leaks it found.
 * The figures are the manager's own, exact and current ({@link UnifiedMemoryManager#statistics(MemoryLocation)}).
 * A failure about open buffers lists where they were allocated when leak detection is {@code paranoid}.
 */
public class UnifiedMemoryManagerAssert extends AbstractAssert<UnifiedMemoryManagerAssert, UnifiedMemoryManager> {

    public UnifiedMemoryManagerAssert(UnifiedMemoryManager actual) {
        super(actual, UnifiedMemoryManagerAssert.class);
    }

    /** No buffer of the manager is open, at any location. */
    public UnifiedMemoryManagerAssert hasNoOpenBuffers() {
        return hasOpenBuffers(0);
    }

    /** Exactly {@code expected} buffers are open, over all locations. */
    public UnifiedMemoryManagerAssert hasOpenBuffers(int expected) {
        isNotNull();
        List<LiveBufferReport> open = actual.liveBuffers();
        if (open.size() != expected) {
            failWithMessage("Expected %d open buffer(s) but the manager has %d%s", expected, open.size(), OpenBuffersReport.sites(open));
        }
        return this;
    }

    /** The bytes of the blocks handed out at {@code location}, as the pool rounded them up (to 512 bytes at least). */
    public UnifiedMemoryManagerAssert hasAllocatedBytes(MemoryLocation location, long expected) {
        isNotNull();
        long allocated = actual.statistics(location).allocatedBytes();
        if (allocated != expected) {
            failWithMessage("Expected %d allocated bytes at %s but there are %d%s", expected, location, allocated, OpenBuffersReport.sites(actual.liveBuffers()));
        }
        return this;
    }

    /** The bytes open buffers at {@code location} asked for. */
    public UnifiedMemoryManagerAssert hasRequestedBytes(MemoryLocation location, long expected) {
        isNotNull();
        long requested = actual.statistics(location).requestedBytes();
        if (requested != expected) {
            failWithMessage("Expected %d requested bytes at %s but there are %d%s", expected, location, requested, OpenBuffersReport.sites(actual.liveBuffers()));
        }
        return this;
    }

    /** No buffer was found garbage-collected without {@code close()} since the manager started. */
    public UnifiedMemoryManagerAssert hasNoLeaksDetected() {
        isNotNull();
        if (actual.leaksDetected() != 0) {
            failWithMessage("Expected no leaks but the manager found %d buffer(s) garbage-collected without close(); "
                    + "the log's LEAK lines say where each was allocated", actual.leaksDetected());
        }
        return this;
    }

    /**
     * The figures of {@code location}, for any other check:
     * {@code statistics(DEVICE).extracting(MemoryStatistics::bytesHostToDevice).isEqualTo(4096L)}.
     */
    public ObjectAssert<MemoryStatistics> statistics(MemoryLocation location) {
        isNotNull();
        return Assertions.assertThat(actual.statistics(location)).as("statistics of %s", location);
    }
}
