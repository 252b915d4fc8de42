package dev.compute.memory.recording;

import dev.compute.memory.AllocationSites;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.resource.Block;
import java.util.stream.Collectors;
import org.jspecify.annotations.Nullable;

/**
 * Starts and stops recordings of what the {@link RecordingResource}s over it see; one recorder serves every
 * location of a manager, so a trace holds them all, in one order. At most one recording at a time. While none is
 * under way (or the one under way is full), an allocation or free costs one volatile read here. Thread-safe.
 */
public final class AllocationRecorder {

    /** The log events go to: null when no recording is under way, or when the one under way is full. */
    private volatile @Nullable EventLog taking;
    /** The recording started and not yet stopped; guarded by this. */
    private @Nullable EventLog current;

    /**
     * Starts a recording; {@code description} (the settings it ran with, say) goes into the trace's header. Throws
     * {@link IllegalStateException} while one is under way.
     */
    public synchronized void start(RecordingOptions options, String description) {
        if (current != null) {
            throw new IllegalStateException("a recording is under way already (started " + current.startedAt() + "): stop it first");
        }
        EventLog log = new EventLog(options, AllocationTrace.oneLine(description));
        current = log;
        taking = log;
    }

    /** Stops the recording under way and returns its trace; throws {@link IllegalStateException} when none is. */
    public synchronized AllocationTrace stop() {
        EventLog log = current;
        if (log == null) {
            throw new IllegalStateException("no recording is under way: start one first");
        }
        taking = null;
        current = null;
        return log.finish();
    }

    /** True from {@link #start} to {@link #stop}, also once the recording is full. */
    public synchronized boolean isRecording() {
        return current != null;
    }

    /** {@code block} was handed out at {@code location}. */
    void allocated(MemoryLocation location, Block block) {
        EventLog log = taking;
        if (log != null) {
            int frames = log.options().callSiteFrames();
            if (!log.allocated(location, block, frames > 0 ? callSite(frames) : null)) {
                stopTaking(log);
            }
        }
    }

    /** {@code block} is about to go back at {@code location}. */
    void freed(MemoryLocation location, Block block) {
        EventLog log = taking;
        if (log != null && !log.freed(location, block)) {
            stopTaking(log);
        }
    }

    private synchronized void stopTaking(EventLog full) {
        if (taking == full) {
            taking = null;
        }
    }

    /** The caller's frames, the caller of the manager first, as the trace's last column: no commas, frames apart by ';'. */
    private static String callSite(int frames) {
        return AllocationSites.callerFrames(frames).stream().map(frame -> frame.toString().replace(',', ' ').replace(';', ' '))
                .collect(Collectors.joining(";"));
    }
}
