package dev.compute.memory.recording;

import dev.compute.memory.MemoryLocation;
import dev.compute.memory.resource.Block;
import java.time.Duration;
import java.time.Instant;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * A recording under way. Events are appended under its lock, so the trace has one order that agrees with every
 * thread's: a free comes after the allocation of its block, since the block is recorded as allocated before its
 * allocating caller can hand it on, and as freed before it goes back upstream, where it could be handed out again.
 * Blocks are named by identity: the pool hands the same {@link Block} out again after a free, under a new id here.
 */
final class EventLog {

    private final RecordingOptions options;
    private final String description;
    private final Instant startedAt = Instant.now();
    private final long startNanos = System.nanoTime();
    private final EventColumns events;
    private final IdentityHashMap<Block, Long> liveIds = new IdentityHashMap<>();
    private final Map<Long, String> threadNames = new LinkedHashMap<>();
    /** One copy of each call site, however many allocations share it. */
    private final Map<String, String> callSites = new HashMap<>();
    private long nextId = 1;
    private long allocations;
    private long frees;
    private long earlierBlockFrees;
    private boolean truncated;
    private boolean finished;

    EventLog(RecordingOptions options, String description) {
        this.options = options;
        this.description = description;
        this.events = new EventColumns(options.callSiteFrames() > 0);
    }

    RecordingOptions options() {
        return options;
    }

    Instant startedAt() {
        return startedAt;
    }

    /** Records an allocation; false when the log is full, which truncates it. */
    synchronized boolean allocated(MemoryLocation location, Block block, @Nullable String callSite) {
        if (finished) {
            return true; // stopped while this thread was on its way here
        }
        if (full()) {
            return false;
        }
        long id = nextId++;
        liveIds.put(block, id);
        allocations++;
        append(TraceEvent.Kind.ALLOCATION, false, id, block.requestedSize(), location,
                callSite != null ? callSites.computeIfAbsent(callSite, site -> site) : null);
        return true;
    }

    /** Records a free; false when the log is full, which truncates it. */
    synchronized boolean freed(MemoryLocation location, Block block) {
        if (finished) {
            return true;
        }
        if (full()) {
            return false;
        }
        Long known = liveIds.remove(block);
        long id;
        if (known != null) {
            id = known;
        } else {
            id = nextId++; // allocated before the recording started: an id no allocation in the trace has
            earlierBlockFrees++;
        }
        frees++;
        append(TraceEvent.Kind.FREE, known == null, id, block.requestedSize(), location, null);
        return true;
    }

    private boolean full() {
        if (events.size() < options.maxEvents()) {
            return false;
        }
        truncated = true;
        return true;
    }

    private void append(TraceEvent.Kind kind, boolean earlierBlock, long id, long bytes, MemoryLocation location, @Nullable String callSite) {
        Thread thread = Thread.currentThread();
        long threadId = thread.threadId();
        threadNames.computeIfAbsent(threadId, ignored -> thread.getName());
        events.add(kind, earlierBlock, id, bytes, location, threadId, System.nanoTime() - startNanos, callSite);
    }

    /** Ends the log; what still arrives is dropped. */
    synchronized AllocationTrace finish() {
        finished = true;
        return new AllocationTrace(options, description, startedAt, Duration.ofNanos(System.nanoTime() - startNanos), events,
                allocations, frees, earlierBlockFrees, truncated, threadNames);
    }
}
