package dev.compute.boot.actuate.metrics;

import dev.compute.boot.actuate.RecentMemoryStatistics;
import dev.compute.memory.BackendInfo;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemoryStatistics;
import dev.compute.memory.UnifiedMemoryManager;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.binder.BaseUnits;
import io.micrometer.core.instrument.binder.MeterBinder;
import java.util.function.ToDoubleFunction;

/**
 * Meters {@code compute.memory.*} for every location of a manager, tagged {@code backend}, {@code device} and
 * {@code location}. Sizes have base unit bytes, so Prometheus shows {@code compute_memory_reserved_bytes};
 * totals since start are function counters ({@code compute_memory_pool_hits_total}); the two fragmentation figures
 * are ratios ({@code compute_memory_fragmentation_ratio}). Every meter reads the one collection of the figures
 * that is at most a second old ({@link RecentMemoryStatistics}), so that a scrape of every meter collects them
 * once; after the manager closed they read NaN.
 *
 * <table>
 *   <caption>Meters</caption>
 *   <tr><th>name</th><th>kind</th><th>what</th></tr>
 *   <tr><td>compute.memory.reserved, .reserved.peak</td><td>gauge, bytes</td><td>held from the backend</td></tr>
 *   <tr><td>compute.memory.allocated, .allocated.peak</td><td>gauge, bytes</td><td>in blocks handed to buffers</td></tr>
 *   <tr><td>compute.memory.requested</td><td>gauge, bytes</td><td>what callers asked for, before rounding</td></tr>
 *   <tr><td>compute.memory.cached</td><td>gauge, bytes</td><td>reserved but free, reusable without a backend call</td></tr>
 *   <tr><td>compute.memory.largest.free.block</td><td>gauge, bytes</td><td>the largest cached block</td></tr>
 *   <tr><td>compute.memory.fragmentation</td><td>gauge, ratio</td><td>1 − largest free block / cached</td></tr>
 *   <tr><td>compute.memory.overhead</td><td>gauge, ratio</td><td>reserved / allocated</td></tr>
 *   <tr><td>compute.memory.live.buffers, .segments</td><td>gauge</td><td>open buffers, pool segments</td></tr>
 *   <tr><td>compute.memory.allocations, .frees</td><td>counter</td><td>buffers allocated and freed</td></tr>
 *   <tr><td>compute.memory.pool.hits, .pool.misses</td><td>counter</td><td>allocations served from the cache, or not</td></tr>
 *   <tr><td>compute.memory.backend.allocations, .backend.frees</td><td>counter</td><td>calls to the backend</td></tr>
 *   <tr><td>compute.memory.oom.retries, .trims</td><td>counter</td><td>retries after releasing cache on OOM; trims</td></tr>
 *   <tr><td>compute.memory.copied</td><td>counter, bytes, tag direction</td><td>host-to-device, device-to-host, device-to-device</td></tr>
 *   <tr><td>compute.memory.leaks</td><td>counter, no location tag</td><td>buffers garbage-collected without close()</td></tr>
 * </table>
 */
public class ComputeMemoryMeterBinder implements MeterBinder {

    static final String PREFIX = "compute.memory.";
    private static final String RATIO = "ratio";

    private final UnifiedMemoryManager manager;
    private final RecentMemoryStatistics statistics;

    public ComputeMemoryMeterBinder(UnifiedMemoryManager manager, RecentMemoryStatistics statistics) {
        this.manager = manager;
        this.statistics = statistics;
    }

    @Override
    public void bindTo(MeterRegistry registry) {
        BackendInfo info = manager.backendInfo();
        // The leak detector counts for the whole manager, so this meter has no location tag.
        FunctionCounter.builder(PREFIX + "leaks", manager, m -> m.isClosed() ? Double.NaN : m.leaksDetected())
                .tags("backend", info.backend(), "device", Integer.toString(info.deviceIndex()))
                .description("Buffers garbage-collected without close(), each logged as a LEAK").register(registry);
        for (MemoryLocation location : manager.locations()) {
            Tags tags = Tags.of("backend", info.backend(), "device", Integer.toString(info.deviceIndex()), "location", location.name());
            gauge(registry, "reserved", BaseUnits.BYTES, tags, location, MemoryStatistics::reservedBytes, "Bytes the pool holds from the backend");
            gauge(registry, "reserved.peak", BaseUnits.BYTES, tags, location, MemoryStatistics::reservedBytesPeak, "Peak of reserved bytes");
            gauge(registry, "allocated", BaseUnits.BYTES, tags, location, MemoryStatistics::allocatedBytes, "Bytes in blocks handed to open buffers");
            gauge(registry, "allocated.peak", BaseUnits.BYTES, tags, location, MemoryStatistics::allocatedBytesPeak, "Peak of allocated bytes");
            gauge(registry, "requested", BaseUnits.BYTES, tags, location, MemoryStatistics::requestedBytes, "Bytes callers asked for, before size rounding");
            gauge(registry, "cached", BaseUnits.BYTES, tags, location, MemoryStatistics::cachedBytes, "Reserved bytes free for reuse without a backend call");
            gauge(registry, "largest.free.block", BaseUnits.BYTES, tags, location, MemoryStatistics::largestFreeBlockBytes, "The largest free cached block");
            gauge(registry, "fragmentation", RATIO, tags, location, MemoryStatistics::fragmentation, "1 - largest free block / cached bytes");
            gauge(registry, "overhead", RATIO, tags, location, MemoryStatistics::overhead, "Reserved bytes / allocated bytes");
            gauge(registry, "live.buffers", "buffers", tags, location, MemoryStatistics::liveBuffers, "Buffers still open");
            gauge(registry, "segments", "segments", tags, location, MemoryStatistics::segments, "Segments the pool holds");
            counter(registry, "allocations", tags, location, MemoryStatistics::allocations, "Buffers allocated");
            counter(registry, "frees", tags, location, MemoryStatistics::frees, "Buffers freed");
            counter(registry, "pool.hits", tags, location, MemoryStatistics::poolHits, "Allocations served from the pool's cache");
            counter(registry, "pool.misses", tags, location, MemoryStatistics::poolMisses, "Allocations that needed memory from the backend");
            counter(registry, "backend.allocations", tags, location, MemoryStatistics::backendAllocations, "Allocation calls to the backend");
            counter(registry, "backend.frees", tags, location, MemoryStatistics::backendFrees, "Free calls to the backend");
            counter(registry, "oom.retries", tags, location, MemoryStatistics::oomRetries, "Allocations retried after the pool released its cache on out-of-memory");
            counter(registry, "trims", tags, location, MemoryStatistics::trims, "Trims of the pool's cache");
            copied(registry, tags, location, "host-to-device", MemoryStatistics::bytesHostToDevice);
            copied(registry, tags, location, "device-to-host", MemoryStatistics::bytesDeviceToHost);
            copied(registry, tags, location, "device-to-device", MemoryStatistics::bytesDeviceToDevice);
        }
    }

    private void gauge(MeterRegistry registry, String name, String unit, Tags tags, MemoryLocation location,
            ToDoubleFunction<MemoryStatistics> figure, String description) {
        Gauge.builder(PREFIX + name, manager, m -> read(m, location, figure))
                .baseUnit(unit).tags(tags).description(description).register(registry);
    }

    private void counter(MeterRegistry registry, String name, Tags tags, MemoryLocation location,
            ToDoubleFunction<MemoryStatistics> figure, String description) {
        FunctionCounter.builder(PREFIX + name, manager, m -> read(m, location, figure))
                .tags(tags).description(description).register(registry);
    }

    private void copied(MeterRegistry registry, Tags tags, MemoryLocation location, String direction, ToDoubleFunction<MemoryStatistics> figure) {
        FunctionCounter.builder(PREFIX + "copied", manager, m -> read(m, location, figure))
                .baseUnit(BaseUnits.BYTES).tags(tags).tag("direction", direction)
                .description("Bytes copied for buffers at this location, by direction").register(registry);
    }

    private double read(UnifiedMemoryManager manager, MemoryLocation location, ToDoubleFunction<MemoryStatistics> figure) {
        if (manager.isClosed()) {
            return Double.NaN;
        }
        return figure.applyAsDouble(statistics.statistics(location));
    }
}
