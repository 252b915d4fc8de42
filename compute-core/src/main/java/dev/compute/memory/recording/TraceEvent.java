package dev.compute.memory.recording;

import dev.compute.memory.MemoryLocation;
import org.jspecify.annotations.Nullable;

/**
 * One recorded allocation or free. {@code id} names the block from its allocation to its free; {@code bytes} is
 * what the caller asked for (before the pool rounded it); {@code threadId} is {@link Thread#threadId()} of the
 * thread that allocated or freed; {@code nanos} counts from the start of the recording. A free of a block
 * allocated before the recording started has an id of its own that no allocation in the trace has
 * ({@link #earlierBlock()}).
 */
public record TraceEvent(Kind kind, long id, long bytes, MemoryLocation location, long threadId, long nanos,
                         boolean earlierBlock, @Nullable String callSite) {

    public enum Kind { ALLOCATION, FREE }

    /**
     * The event as a line of the replayer's format: {@code a,<id>,<bytes>,<stream>,<location>,<thread>,<nanos>}
     * and the call site where one was taken, or {@code f,<id>,<thread>,<nanos>}. The stream is always 0: the pool
     * does not tie blocks to streams.
     */
    public String line() {
        return kind == Kind.ALLOCATION
                ? "a," + id + "," + bytes + ",0," + location + "," + threadId + "," + nanos + (callSite != null ? "," + callSite : "")
                : "f," + id + "," + threadId + "," + nanos;
    }
}
