package dev.compute.benchmarks.replay;

import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.MemoryEventListener;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.resource.BackendResource;
import dev.compute.memory.resource.Block;
import dev.compute.memory.resource.PoolSettings;
import dev.compute.memory.resource.pool.CachingPoolResource;
import dev.compute.memory.spi.ComputeBackend;
import java.util.Arrays;
import java.util.function.LongFunction;
import java.util.function.LongPredicate;
import org.jspecify.annotations.Nullable;

/**
 * Replays a trace through the caching pool with the given {@link ReplaySettings}: by default those the manager gives
 * it (expandable segments on, the default release threshold and trim interval), except the cap, which is the
 * device's capacity unless set. Where the trace says when events happened, a trim runs each time its time passes a
 * trim interval, as the manager's maintenance thread would. The capacity search replays the trace again and again,
 * halving the interval between a capacity that failed and one that fitted; a replay fails at its first
 * {@link DeviceOutOfMemoryException}, which the pool throws only after it released its cache and retried. Not
 * thread-safe: one replay at a time.
 */
public final class TraceReplayer {

    /** Capacities are searched to this resolution. */
    static final long CAPACITY_STEP = 1L << 20;

    private final LongFunction<ComputeBackend> backendWithCapacity;
    private final boolean closeBackends;
    private final ReplaySettings settings;

    /**
     * {@code backendWithCapacity} opens a backend of the given capacity for one replay (closed after it when
     * {@code closeBackends}); a real device ignores the capacity, and the pool's cap alone limits the replay.
     */
    public TraceReplayer(LongFunction<ComputeBackend> backendWithCapacity, boolean closeBackends, ReplaySettings settings) {
        this.backendWithCapacity = backendWithCapacity;
        this.closeBackends = closeBackends;
        this.settings = settings;
    }

    /**
     * One replay: whether the whole trace fitted (if not, the event that failed and the pool's message), the pool's
     * peak, its backend calls and scheduled trims, and the replay's time.
     */
    public record Run(boolean fitted, int failedEvent, @Nullable String failure, long reservedPeak, long backendCalls,
                      long maps, long unmaps, long oomRetries, long trims, long nanos) {

        /** The calls counted as PyTorch's {@code num_device_alloc} is, on the other side: maps and unmaps, no range reservations. */
        public long mapsAndUnmaps() {
            return maps + unmaps;
        }
    }

    public Run replay(Trace trace, long capacity) {
        ComputeBackend device = backendWithCapacity.apply(capacity);
        CountingBackend backend = new CountingBackend(device);
        MemoryLocation location = device.defaultLocation();
        long cap = settings.capFor(trace.locations(), capacity);
        long keepOnTrim = settings.releaseThresholdFor(cap);
        long trimEvery = trace.hasTimes() ? settings.trimInterval().toNanos() : 0;
        Block[] live = new Block[trace.slotCount()];
        int[] slots = trace.slots();
        long[] bytes = trace.bytes();
        long[] times = trace.columns().nanos();
        BackendResource upstream = new BackendResource(backend, location, cap, "max-pool-size", PoolSettings.DEFAULT_DEVICE_WAIT_TIMEOUT,
                MemoryEventListener.NONE);
        PoolSettings layout = settings.expandableSegments() ? PoolSettings.expandable() : PoolSettings.plainSegments();
        try (CachingPoolResource pool = new CachingPoolResource(upstream, layout, MemoryEventListener.NONE)) {
            int failedEvent = -1;
            String failure = null;
            long trims = 0;
            long nextTrim = trimEvery;
            long start = System.nanoTime();
            int i = 0;
            try {
                for (; i < slots.length; i++) {
                    if (trimEvery > 0 && times[i] >= nextTrim) {
                        pool.trim(keepOnTrim);
                        trims++;
                        long next = times[i] / trimEvery + 1;
                        if (next > Long.MAX_VALUE / trimEvery) {
                            trimEvery = 0; // the next interval starts past any time a trace can say: no more trims
                        }
                        nextTrim = next * trimEvery;
                    }
                    if (bytes[i] > 0) {
                        live[slots[i]] = allocate(pool, bytes[i]);
                    } else {
                        pool.deallocate(live[slots[i]]);
                        live[slots[i]] = null;
                    }
                }
            } catch (DeviceOutOfMemoryException e) {
                failedEvent = i;
                failure = e.getMessage();
            }
            long nanos = System.nanoTime() - start;
            long calls = backend.memoryCalls();
            long maps = backend.maps();
            long unmaps = backend.unmaps();
            long reservedPeak = pool.reservedBytesPeak();
            long oomRetries = pool.oomRetries();
            for (Block block : live) {
                if (block != null) {
                    pool.deallocate(block);
                }
            }
            return new Run(failedEvent < 0, failedEvent, failure, reservedPeak, calls, maps, unmaps, oomRetries, trims, nanos);
        } finally {
            if (closeBackends) {
                device.close();
            }
        }
    }

    /**
     * The pool's allocation; where refused and the settings compact on out-of-memory, as the manager does: every large
     * block a compaction would move is moved (no copy: a replay has no data), and the allocation is tried once more.
     */
    private Block allocate(CachingPoolResource pool, long bytes) {
        try {
            return pool.allocate(bytes);
        } catch (DeviceOutOfMemoryException refused) {
            if (!settings.compactOnOutOfMemory()) {
                throw refused;
            }
            for (Block block : pool.compactionOrder()) {
                if (pool.movable(block)) {
                    pool.relocate(block, (from, to) -> { });
                }
            }
            return pool.allocate(bytes);
        }
    }

    /**
     * The figures of a trace: a replay at {@code capacity}, which must fit (else {@link ReplayFailedException} naming
     * the event that failed), {@code warmups} more to let the JIT compile the pool, {@code timedRuns} timed ones (the
     * median gives events per second), then the capacity search. A trace without allocations has no live peak to measure
     * against: {@link ReplayFailedException} saying so.
     */
    public ReplayResult measure(Trace trace, long capacity, int warmups, int timedRuns) {
        if (trace.livePeak() == 0) {
            throw new ReplayFailedException(trace.name() + " has no allocations to replay"
                    + (trace.skippedFrees() > 0 ? ", only " + trace.skippedFrees() + " frees of ids not live" : ""));
        }
        Run run = replay(trace, capacity);
        if (!run.fitted()) {
            throw new ReplayFailedException(trace.describe(run.failedEvent()) + " failed with a device of " + capacity
                    + " bytes and the pool capped at " + settings.capFor(trace.locations(), capacity) + " bytes: " + run.failure());
        }
        for (int i = 0; i < warmups; i++) {
            replay(trace, capacity);
        }
        long[] nanos = new long[Math.max(1, timedRuns)];
        for (int i = 0; i < nanos.length; i++) {
            nanos[i] = replay(trace, capacity).nanos();
        }
        Arrays.sort(nanos);
        double eventsPerSecond = trace.events() / (nanos[nanos.length / 2] / 1e9);
        long minCapacity = smallestCapacity(trace, Math.min(capacity, roundUp(run.reservedPeak())), capacity);
        return new ReplayResult(trace.name(), String.join("+", trace.locations()), trace.events(), trace.livePeak(), run.reservedPeak(),
                minCapacity, run.backendCalls(), run.maps(), run.unmaps(), eventsPerSecond, trace.skippedFrees(), run.trims(), trace.livePeakByStream(),
                trace.livePeakByThread());
    }

    /**
     * Bisection, in whole {@link #CAPACITY_STEP}s, between the largest capacity below the live peak (nothing
     * smaller can fit) and {@code fitting} (doubled, up to {@code limit}, if it does not fit after all).
     */
    long smallestCapacity(Trace trace, long fitting, long limit) {
        return smallestFitting(trace.livePeak(), fitting, limit, capacity -> replay(trace, capacity).fitted());
    }

    /**
     * The smallest capacity, in whole {@link #CAPACITY_STEP}s, that {@code fits}, by bisection between the largest one
     * below {@code livePeak} and {@code fitting} (doubled, up to {@code limit}, where it does not fit after all); as
     * if fitting were monotone in the capacity, which it need not be. {@code limit} where nothing up to it fits.
     */
    static long smallestFitting(long livePeak, long fitting, long limit, LongPredicate fits) {
        long lo = (livePeak - 1) / CAPACITY_STEP;
        long hi = Math.ceilDiv(fitting, CAPACITY_STEP);
        long most = limit / CAPACITY_STEP;
        while (!fits.test(hi * CAPACITY_STEP)) {
            if (hi >= most) {
                return limit;
            }
            lo = hi;
            hi = Math.min(most, 2 * hi);
        }
        while (hi - lo > 1) {
            long mid = lo + (hi - lo) / 2;
            if (fits.test(mid * CAPACITY_STEP)) {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        return hi * CAPACITY_STEP;
    }

    private static long roundUp(long bytes) {
        return Math.ceilDiv(bytes, CAPACITY_STEP) * CAPACITY_STEP;
    }
}
