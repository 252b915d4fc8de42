package dev.compute.boot.actuate;

import dev.compute.memory.DeviceMemoryInfo;
import dev.compute.memory.MappedFileStatistics;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemoryStatistics;
import dev.compute.memory.UnifiedMemoryManager;
import java.time.Duration;
import java.util.Map;
import java.util.function.LongSupplier;
import org.jspecify.annotations.Nullable;

/**
 * The figures of one manager that the endpoint, the health contributor and the meters read: every location's
 * statistics, the files it has mapped and the device's memory, collected at most once per {@link #MAX_AGE} however many read them
 * (and again at each read once the manager has closed, until nothing is left that the close may free, so that what it
 * freed is not shown as held), as
 * HikariCP's {@code PoolStats} keeps what its metrics read. A Prometheus scrape reads some 25 meters per location;
 * they all read one collection. Whoever needs figures that are exact at this instant asks
 * {@link UnifiedMemoryManager#statistics(MemoryLocation)}. The statistics and the device's memory are collected apart,
 * so that a driver that fails to answer leaves the pool's figures, which need no driver, to be read. Thread-safe.
 */
public class RecentMemoryStatistics {

    /** The oldest figures handed out. */
    public static final Duration MAX_AGE = Duration.ofSeconds(1);

    private final UnifiedMemoryManager manager;
    private final long maxAgeNanos;
    private final LongSupplier nanoTime;
    private @Nullable Collected collected;
    /**
     * Held while the backend is asked for the device's memory, apart from this object's lock, which guards the pool's
     * figures: a driver call that does not return holds up no reader of those.
     */
    private final Object askingDevice = new Object();
    /** Guarded by {@link #askingDevice}. */
    private @Nullable AskedDevice askedDevice;

    /** {@code afterClose}: the manager's close had begun when these were collected. */
    private record Collected(long atNanos, boolean afterClose, Map<MemoryLocation, MemoryStatistics> statistics, MappedFileStatistics mappedFiles) {

        /**
         * Whether these are what the close left for good: collected after it began, with nothing reserved or mapped,
         * which it frees once its waits end (or keeps for good, when they run out: collected again at each read then).
         */
        boolean leftByTheClose() {
            return afterClose && mappedFiles.openMappings() == 0 && statistics.values().stream().allMatch(each -> each.reservedBytes() == 0);
        }
    }

    private record AskedDevice(long atNanos, DeviceMemoryInfo deviceMemory) {}

    public RecentMemoryStatistics(UnifiedMemoryManager manager) {
        this(manager, MAX_AGE, System::nanoTime);
    }

    /** With another age and clock ({@link System#nanoTime()}'s kind), for tests. */
    RecentMemoryStatistics(UnifiedMemoryManager manager, Duration maxAge, LongSupplier nanoTime) {
        this.manager = manager;
        this.maxAgeNanos = maxAge.toNanos();
        this.nanoTime = nanoTime;
    }

    /** Every location's statistics, in the manager's order, collected at most {@link #MAX_AGE} ago. */
    public Map<MemoryLocation, MemoryStatistics> statistics() {
        return recent().statistics();
    }

    /** The files the manager has mapped (no location's figures count them), collected with the statistics. */
    public MappedFileStatistics mappedFiles() {
        return recent().mappedFiles();
    }

    private synchronized Collected recent() {
        long now = nanoTime.getAsLong();
        Collected last = collected;
        // what an open manager held, or a closing one while its close waited, is not handed out once the close freed it,
        // however young the collection
        if (last == null || now - last.atNanos() >= maxAgeNanos || !last.leftByTheClose() && manager.isClosed()) {
            last = collect(now);
        }
        return last;
    }

    /** The device's memory as the backend tells it (a driver call on a GPU), asked at most {@link #MAX_AGE} ago. */
    public DeviceMemoryInfo deviceMemory() {
        synchronized (askingDevice) {
            long now = nanoTime.getAsLong();
            AskedDevice last = askedDevice;
            if (last == null || now - last.atNanos() >= maxAgeNanos) {
                last = new AskedDevice(now, manager.deviceMemory());
                askedDevice = last;
            }
            return last.deviceMemory();
        }
    }

    /** One location's statistics, collected at most {@link #MAX_AGE} ago. */
    public MemoryStatistics statistics(MemoryLocation location) {
        MemoryStatistics statistics = statistics().get(location);
        if (statistics == null) {
            throw new IllegalArgumentException(location + " memory is not available on this manager; available: " + manager.locations());
        }
        return statistics;
    }

    /** Collects now, for this caller and the readers after it: after a trim, say, which changed the figures. */
    public synchronized Map<MemoryLocation, MemoryStatistics> refresh() {
        return collect(nanoTime.getAsLong()).statistics();
    }

    private Collected collect(long now) {
        boolean afterClose = manager.isClosed(); // asked first: a close that begins while collecting has the next reader collect again
        Collected fresh = new Collected(now, afterClose, manager.statistics(), manager.mappedFileStatistics());
        collected = fresh;
        return fresh;
    }
}
