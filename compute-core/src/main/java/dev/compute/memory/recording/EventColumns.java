package dev.compute.memory.recording;

import dev.compute.memory.MemoryLocation;
import java.util.ArrayList;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * The events of one recording, a column per field in chunks of {@value #CHUNK}: about 40 bytes an event, where an
 * object per event would take half as much again, and a long recording grows without copying what it has. Not
 * thread-safe: its recording appends under a lock, and reads only once it is finished.
 */
final class EventColumns {

    private static final int CHUNK = 4096;
    private static final MemoryLocation[] LOCATIONS = MemoryLocation.values();
    private static final byte ALLOCATION = 0;
    private static final byte FREE = 1;
    private static final byte FREE_OF_EARLIER_BLOCK = 2;

    private final boolean withCallSites;
    private final List<byte[]> kinds = new ArrayList<>();
    private final List<byte[]> locations = new ArrayList<>();
    private final List<long[]> ids = new ArrayList<>();
    private final List<long[]> bytes = new ArrayList<>();
    private final List<long[]> threads = new ArrayList<>();
    private final List<long[]> nanos = new ArrayList<>();
    private final List<@Nullable String[]> callSites = new ArrayList<>();
    private int size;

    EventColumns(boolean withCallSites) {
        this.withCallSites = withCallSites;
    }

    int size() {
        return size;
    }

    void add(TraceEvent.Kind kind, boolean earlierBlock, long id, long byteCount, MemoryLocation location, long threadId,
             long nanosSinceStart, @Nullable String callSite) {
        int at = size % CHUNK;
        if (at == 0) {
            kinds.add(new byte[CHUNK]);
            locations.add(new byte[CHUNK]);
            ids.add(new long[CHUNK]);
            bytes.add(new long[CHUNK]);
            threads.add(new long[CHUNK]);
            nanos.add(new long[CHUNK]);
            if (withCallSites) {
                callSites.add(new String[CHUNK]);
            }
        }
        int chunk = size / CHUNK;
        kinds.get(chunk)[at] = kind == TraceEvent.Kind.ALLOCATION ? ALLOCATION : earlierBlock ? FREE_OF_EARLIER_BLOCK : FREE;
        locations.get(chunk)[at] = (byte) location.ordinal();
        ids.get(chunk)[at] = id;
        bytes.get(chunk)[at] = byteCount;
        threads.get(chunk)[at] = threadId;
        nanos.get(chunk)[at] = nanosSinceStart;
        if (withCallSites) {
            callSites.get(chunk)[at] = callSite;
        }
        size++;
    }

    TraceEvent get(int index) {
        if (index < 0 || index >= size) {
            throw new IndexOutOfBoundsException("event " + index + " of " + size);
        }
        int chunk = index / CHUNK;
        int at = index % CHUNK;
        byte kind = kinds.get(chunk)[at];
        return new TraceEvent(kind == ALLOCATION ? TraceEvent.Kind.ALLOCATION : TraceEvent.Kind.FREE, ids.get(chunk)[at],
                bytes.get(chunk)[at], LOCATIONS[locations.get(chunk)[at]], threads.get(chunk)[at], nanos.get(chunk)[at],
                kind == FREE_OF_EARLIER_BLOCK, withCallSites ? callSites.get(chunk)[at] : null);
    }
}
