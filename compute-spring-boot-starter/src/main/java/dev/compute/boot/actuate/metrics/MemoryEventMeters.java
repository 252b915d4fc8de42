package dev.compute.boot.actuate.metrics;

import dev.compute.memory.MemoryEventListener;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.OutOfMemoryReason;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.Timer;
import java.util.ArrayList;
import java.util.Collection;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * The meters fed by one manager's events rather than read from its figures: allocations that failed for good, by
 * reason; the time of backend allocations and frees; the time of out-of-memory recovery, by outcome. All are
 * registered at once, so a series is there (at 0) before its first event and a rate can be taken from the start.
 * The manager calls these methods off its fast path (a pool hit calls none), some under the pool's lock: each is a
 * map lookup and an increment.
 */
final class MemoryEventMeters implements MemoryEventListener {

    private final Map<MemoryLocation, Map<OutOfMemoryReason, Counter>> failures = new EnumMap<>(MemoryLocation.class);
    private final Map<MemoryLocation, Timer> backendAllocate = new EnumMap<>(MemoryLocation.class);
    private final Map<MemoryLocation, Timer> backendFree = new EnumMap<>(MemoryLocation.class);
    private final Map<MemoryLocation, Timer> recovered = new EnumMap<>(MemoryLocation.class);
    private final Map<MemoryLocation, Timer> notRecovered = new EnumMap<>(MemoryLocation.class);
    private final List<Meter> meters = new ArrayList<>();

    /** Registers the meters of {@code locations} with {@code tags} (the manager's) in {@code registry}. */
    MemoryEventMeters(MeterRegistry registry, Tags tags, Collection<MemoryLocation> locations) {
        for (MemoryLocation location : locations) {
            Tags at = tags.and(ComputeMeters.Tag.LOCATION.asString(), ComputeMemoryMeterBinder.tagValue(location));
            Map<OutOfMemoryReason, Counter> byReason = new EnumMap<>(OutOfMemoryReason.class);
            for (OutOfMemoryReason reason : OutOfMemoryReason.values()) {
                byReason.put(reason, add(Counter.builder(ComputeMeters.ALLOCATION_FAILURES.getName())
                        .description(ComputeMeters.ALLOCATION_FAILURES.description())
                        .tags(at).tag(ComputeMeters.Tag.REASON.asString(), ComputeMemoryMeterBinder.tagValue(reason)).register(registry)));
            }
            failures.put(location, byReason);
            backendAllocate.put(location, timer(registry, ComputeMeters.BACKEND_ALLOCATE, at));
            backendFree.put(location, timer(registry, ComputeMeters.BACKEND_FREE, at));
            recovered.put(location, timer(registry, ComputeMeters.OOM_RECOVERY, at.and(ComputeMeters.Tag.OUTCOME.asString(), "recovered")));
            notRecovered.put(location, timer(registry, ComputeMeters.OOM_RECOVERY, at.and(ComputeMeters.Tag.OUTCOME.asString(), "failed")));
        }
    }

    /** What was registered, for removal. */
    List<Meter> meters() {
        return meters;
    }

    @Override
    public void backendAllocated(MemoryLocation location, long bytes, long nanos) {
        record(backendAllocate.get(location), nanos);
    }

    @Override
    public void backendFreed(MemoryLocation location, long bytes, long nanos) {
        record(backendFree.get(location), nanos);
    }

    @Override
    public void outOfMemoryRecovery(MemoryLocation location, long requestedBytes, RecoveryOutcome outcome, long nanos) {
        record((outcome == RecoveryOutcome.RECOVERED ? recovered : notRecovered).get(location), nanos);
    }

    @Override
    public void allocationFailed(MemoryLocation location, long requestedBytes, OutOfMemoryReason reason) {
        Map<OutOfMemoryReason, Counter> byReason = failures.get(location);
        if (byReason != null) {
            byReason.get(reason).increment();
        }
    }

    private static void record(Timer timer, long nanos) {
        // a location the manager did not have when the meters were made has no timer
        if (timer != null) {
            timer.record(nanos, TimeUnit.NANOSECONDS);
        }
    }

    private Timer timer(MeterRegistry registry, ComputeMeters meter, Tags tags) {
        return add(Timer.builder(meter.getName()).description(meter.description()).tags(tags).register(registry));
    }

    private <M extends Meter> M add(M meter) {
        meters.add(meter);
        return meter;
    }
}
