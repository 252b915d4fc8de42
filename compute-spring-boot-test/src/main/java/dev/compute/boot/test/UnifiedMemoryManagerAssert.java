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
        long allocated = statisticsAt(location, "%d allocated bytes at %s".formatted(expected, location)).allocatedBytes();
        if (allocated != expected) {
            failWithMessage("Expected %d allocated bytes at %s but there are %d%s", expected, location, allocated, OpenBuffersReport.sites(pooledBuffersAt(location)));
        }
        return this;
    }

    /** The bytes open buffers at {@code location} asked for. */
    public UnifiedMemoryManagerAssert hasRequestedBytes(MemoryLocation location, long expected) {
        isNotNull();
        long requested = statisticsAt(location, "%d requested bytes at %s".formatted(expected, location)).requestedBytes();
        if (requested != expected) {
            failWithMessage("Expected %d requested bytes at %s but there are %d%s", expected, location, requested, OpenBuffersReport.sites(pooledBuffersAt(location)));
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
        return Assertions.assertThat(statisticsAt(location, "the statistics of " + location)).as("statistics of %s", location);
    }

    /** The open buffers that {@code location}'s figures count: those there, less mapped files, which are no pooled memory. */
    private List<LiveBufferReport> pooledBuffersAt(MemoryLocation location) {
        return actual.liveBuffers().stream().filter(buffer -> buffer.location() == location && buffer.mappedFile() == null).toList();
    }

    /**
     * The figures of {@code location}; a location the manager lacks (PINNED with pinning off, say) fails the test
     * saying so, rather than throw the manager's {@link IllegalArgumentException} from inside an assertion.
     */
    private MemoryStatistics statisticsAt(MemoryLocation location, String expected) {
        if (location == null) {
            // the test's own mistake, not a failure of the code under test: said as such, rather than a NullPointerException from the list
            throw new IllegalArgumentException("a location to check is needed, not null: one of the manager's " + actual.locations());
        }
        if (!actual.locations().contains(location)) {
            failWithMessage("Expected %s but the manager has no %s memory; its locations: %s", expected, location, actual.locations());
        }
        return actual.statistics(location);
    }
}
