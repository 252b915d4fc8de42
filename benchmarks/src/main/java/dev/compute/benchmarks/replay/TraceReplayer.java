package dev.compute.benchmarks.replay;

import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemoryEventListener;
import dev.compute.memory.resource.Block;
import dev.compute.memory.resource.BackendResource;
import dev.compute.memory.resource.PoolSettings;
import dev.compute.memory.resource.pool.CachingPoolResource;
import dev.compute.memory.spi.ComputeBackend;
import java.util.Arrays;
import java.util.function.LongFunction;

/**
 * Replays a trace through the caching pool with the settings the manager gives it by default (expandable
 * segments on, the default release threshold), except the cap: the default max-pool-size (4 GiB) is smaller
 * than a big trace, so the cap is the device's capacity. The capacity search replays the trace again and
 * again, halving the interval between a capacity that failed and one that fitted; a replay fails at its
 * first {@link DeviceOutOfMemoryException}, which the pool throws only after it released its cache and
 * retried. Not thread-safe: one replay at a time.
 */
public final class TraceReplayer {

    /** Capacities are searched to this resolution. */
    static final long CAPACITY_STEP = 1L << 20;

    private final LongFunction<ComputeBackend> backendWithCapacity;
    private final boolean closeBackends;

    /**
     * {@code backendWithCapacity} opens a backend of the given capacity for one replay (closed after it when
     * {@code closeBackends}); a real device ignores the capacity, and the pool's cap alone limits the replay.
     */
    public TraceReplayer(LongFunction<ComputeBackend> backendWithCapacity, boolean closeBackends) {
        this.backendWithCapacity = backendWithCapacity;
        this.closeBackends = closeBackends;
    }

    /** One replay: whether the whole trace fitted, the pool's peak, its backend calls and the replay's time. */
    public record Run(boolean fitted, long reservedPeak, long backendCalls, long oomRetries, long nanos) {}

    public Run replay(Trace trace, long capacity) {
        ComputeBackend device = backendWithCapacity.apply(capacity);
        CountingBackend backend = new CountingBackend(device);
        MemoryLocation location = device.defaultLocation();
        Block[] live = new Block[trace.slotCount()];
        int[] slots = trace.slots();
        long[] bytes = trace.bytes();
        BackendResource upstream = new BackendResource(backend, location, capacity, "capacity", PoolSettings.DEFAULT_DEVICE_WAIT_TIMEOUT,
                MemoryEventListener.NONE);
        try (CachingPoolResource pool = new CachingPoolResource(upstream, PoolSettings.expandable(), MemoryEventListener.NONE)) {
            boolean fitted = true;
            long start = System.nanoTime();
            try {
                for (int i = 0; i < slots.length; i++) {
                    if (bytes[i] > 0) {
                        live[slots[i]] = pool.allocate(bytes[i]);
                    } else {
                        pool.deallocate(live[slots[i]]);
                        live[slots[i]] = null;
                    }
                }
            } catch (DeviceOutOfMemoryException e) {
                fitted = false;
            }
            long nanos = System.nanoTime() - start;
            long calls = backend.memoryCalls();
            long reservedPeak = pool.reservedBytesPeak();
            long oomRetries = pool.oomRetries();
            for (Block block : live) {
                if (block != null) {
                    pool.deallocate(block);
                }
            }
            return new Run(fitted, reservedPeak, calls, oomRetries, nanos);
        } finally {
            if (closeBackends) {
                device.close();
            }
        }
    }

    /**
     * The figures of a trace: a default-settings replay at {@code capacity} (which must fit), {@code warmups}
     * more to let the JIT compile the pool, {@code timedRuns} timed ones (the median gives events per second),
     * then the capacity search.
     */
    public ReplayResult measure(Trace trace, long capacity, int warmups, int timedRuns) {
        Run run = replay(trace, capacity);
        if (!run.fitted()) {
            throw new IllegalArgumentException(trace.name() + " does not fit in a capacity of " + capacity + " bytes; give a larger --capacity");
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
        return new ReplayResult(trace.name(), trace.events(), trace.livePeak(), run.reservedPeak(), minCapacity, run.backendCalls(), eventsPerSecond);
    }

    /**
     * Bisection, in whole {@link #CAPACITY_STEP}s, between the largest capacity below the live peak (nothing
     * smaller can fit) and {@code fitting} (doubled, up to {@code limit}, if it does not fit after all).
     */
    long smallestCapacity(Trace trace, long fitting, long limit) {
        long lo = (trace.livePeak() - 1) / CAPACITY_STEP;
        long hi = Math.ceilDiv(fitting, CAPACITY_STEP);
        long most = limit / CAPACITY_STEP;
        while (!replay(trace, hi * CAPACITY_STEP).fitted()) {
            if (hi >= most) {
                return limit;
            }
            lo = hi;
            hi = Math.min(most, 2 * hi);
        }
        while (hi - lo > 1) {
            long mid = lo + (hi - lo) / 2;
            if (replay(trace, mid * CAPACITY_STEP).fitted()) {
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
