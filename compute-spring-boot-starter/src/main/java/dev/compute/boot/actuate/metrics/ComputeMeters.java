package dev.compute.boot.actuate.metrics;

import io.micrometer.common.docs.KeyName;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.binder.BaseUnits;
import io.micrometer.core.instrument.docs.MeterDocumentation;
import org.jspecify.annotations.Nullable;

/**
 * Every meter of the starter, in Micrometer's {@link MeterDocumentation} form: name, kind, base unit, tags and what
 * it says. The one place a meter is named; the binder registers them from here and the README's table is rendered
 * from here (a test fails, with the table to paste, when they differ). Every meter carries {@link Tag#NAME},
 * {@link Tag#BACKEND} and {@link Tag#DEVICE}; tag values are lower case ({@code location="host"},
 * {@code reason="pool-limit"}).
 */
public enum ComputeMeters implements MeterDocumentation {

    RESERVED("compute.memory.reserved", Meter.Type.GAUGE, BaseUnits.BYTES, "Bytes the pool holds from the backend", Tag.LOCATION),
    RESERVED_PEAK("compute.memory.reserved.peak", Meter.Type.GAUGE, BaseUnits.BYTES, "Peak of reserved bytes", Tag.LOCATION),
    ALLOCATED("compute.memory.allocated", Meter.Type.GAUGE, BaseUnits.BYTES, "Bytes in blocks handed to open buffers", Tag.LOCATION),
    ALLOCATED_PEAK("compute.memory.allocated.peak", Meter.Type.GAUGE, BaseUnits.BYTES, "Peak of allocated bytes", Tag.LOCATION),
    REQUESTED("compute.memory.requested", Meter.Type.GAUGE, BaseUnits.BYTES, "Bytes callers asked for, before size rounding", Tag.LOCATION),
    CACHED("compute.memory.cached", Meter.Type.GAUGE, BaseUnits.BYTES, "Reserved bytes free for reuse without a backend call", Tag.LOCATION),
    LARGEST_FREE_BLOCK("compute.memory.largest.free.block", Meter.Type.GAUGE, BaseUnits.BYTES, "The largest free cached block outside budgets' reservations", Tag.LOCATION),
    RESERVATIONS_CACHED("compute.memory.reservations.cached", Meter.Type.GAUGE, BaseUnits.BYTES,
            "Cached bytes in budgets' reservations, which only requests under those budgets take", Tag.LOCATION),
    CAP("compute.memory.cap", Meter.Type.GAUGE, BaseUnits.BYTES,
            "The most the location may reserve: max-pool-size, max-pinned-size for pinned", Tag.LOCATION),
    FRAGMENTATION("compute.memory.fragmentation", Meter.Type.GAUGE, "ratio", "1 - largest free block / cached bytes outside budgets' reservations", Tag.LOCATION),
    OVERHEAD("compute.memory.overhead", Meter.Type.GAUGE, "ratio", "Reserved bytes / allocated bytes", Tag.LOCATION),
    LIVE_BUFFERS("compute.memory.live.buffers", Meter.Type.GAUGE, "buffers",
            "Buffers still open (a device buffer's host mirror is none: its bytes count in its location's allocated)", Tag.LOCATION),
    HELD("compute.memory.held", Meter.Type.GAUGE, BaseUnits.BYTES,
            "Bytes of closed buffers waiting for a view another thread holds", Tag.LOCATION),
    HELD_BUFFERS("compute.memory.held.buffers", Meter.Type.GAUGE, "buffers",
            "Closed buffers whose memory waits for a view another thread holds", Tag.LOCATION),
    SEGMENTS("compute.memory.segments", Meter.Type.GAUGE, "segments", "Segments the pool holds", Tag.LOCATION),
    WAITING("compute.memory.waiting", Meter.Type.GAUGE, "requests",
            "allocateAsync requests queued for memory at this location now (those queued for room in a budget are the budget's)", Tag.LOCATION),
    ALLOCATIONS("compute.memory.allocations", Meter.Type.COUNTER, null, "Buffers allocated", Tag.LOCATION),
    FREES("compute.memory.frees", Meter.Type.COUNTER, null, "Buffers freed", Tag.LOCATION),
    POOL_HITS("compute.memory.pool.hits", Meter.Type.COUNTER, null, "Allocations served from the pool's cache", Tag.LOCATION),
    POOL_MISSES("compute.memory.pool.misses", Meter.Type.COUNTER, null, "Allocations that needed memory from the backend", Tag.LOCATION),
    BACKEND_ALLOCATIONS("compute.memory.backend.allocations", Meter.Type.COUNTER, null, "Allocation calls to the backend", Tag.LOCATION),
    BACKEND_FREES("compute.memory.backend.frees", Meter.Type.COUNTER, null, "Free calls to the backend", Tag.LOCATION),
    OOM_RETRIES("compute.memory.oom.retries", Meter.Type.COUNTER, null,
            "Allocations retried after the pool released its cache on out-of-memory", Tag.LOCATION),
    TRIMS("compute.memory.trims", Meter.Type.COUNTER, null, "Trims of the pool's cache", Tag.LOCATION),
    WAITS("compute.memory.waits", Meter.Type.COUNTER, null, "allocateAsync requests that had to queue for memory at this location", Tag.LOCATION),
    WAIT_TIMEOUTS("compute.memory.wait.timeouts", Meter.Type.COUNTER, null,
            "allocateAsync requests queued for memory at this location that gave up when their timeout passed", Tag.LOCATION),
    COPIED("compute.memory.copied", Meter.Type.COUNTER, BaseUnits.BYTES,
            "Bytes copied for buffers at this location, by direction: host-to-device, device-to-host, device-to-device", Tag.LOCATION, Tag.DIRECTION),
    ALLOCATION_FAILURES("compute.memory.allocation.failures", Meter.Type.COUNTER, null,
            "Allocations that failed for good (DeviceOutOfMemoryException), by reason: pool-limit, adaptor-limit, budget-limit, device-memory, device-work-stuck",
            Tag.LOCATION, Tag.REASON),
    BACKEND_ALLOCATE("compute.memory.backend.allocate", Meter.Type.TIMER, null,
            "Time the backend took to give the pool memory (a segment, or pages mapped); never a pool hit", Tag.LOCATION),
    BACKEND_FREE("compute.memory.backend.free", Meter.Type.TIMER, null,
            "Time the backend took to take memory back (a segment freed, or pages unmapped)", Tag.LOCATION),
    OOM_RECOVERY("compute.memory.oom.recovery", Meter.Type.TIMER, null,
            "Time spent making room after out-of-memory, one record per step taken or declined (the cache released, the location compacted, OutOfMemoryHandlers asked), by outcome: recovered, failed",
            Tag.LOCATION, Tag.OUTCOME),
    BUDGET_ALLOCATED("compute.memory.budget.allocated", Meter.Type.GAUGE, BaseUnits.BYTES,
            "Bytes a configured budget holds, with the budgets under it (requests', tasks'), at all locations", Tag.BUDGET),
    BUDGET_ALLOCATED_PEAK("compute.memory.budget.allocated.peak", Meter.Type.GAUGE, BaseUnits.BYTES, "Peak of a configured budget's allocated bytes",
            Tag.BUDGET),
    BUDGET_LIMIT("compute.memory.budget.limit", Meter.Type.GAUGE, BaseUnits.BYTES, "The most a configured budget may hold at all locations",
            Tag.BUDGET),
    BUDGET_RESERVED("compute.memory.budget.reserved", Meter.Type.GAUGE, BaseUnits.BYTES, "Bytes kept for a configured budget alone", Tag.BUDGET),
    BUDGET_LIVE_BUFFERS("compute.memory.budget.live.buffers", Meter.Type.GAUGE, "buffers",
            "Buffers a configured budget holds, with the budgets under it", Tag.BUDGET),
    BUDGET_WAITING("compute.memory.budget.waiting", Meter.Type.GAUGE, "requests",
            "allocateAsync requests queued for room in a configured budget or a budget under it", Tag.BUDGET),
    BUDGET_ALLOCATIONS("compute.memory.budget.allocations", Meter.Type.COUNTER, null,
            "Buffers allocated through a configured budget or a budget under it", Tag.BUDGET),
    BUDGET_REFUSALS("compute.memory.budget.refusals", Meter.Type.COUNTER, null,
            "Requests through a configured budget or a budget under it refused for want of room in it or under it", Tag.BUDGET),
    MAPPED_FILES("compute.memory.mapped.files", Meter.Type.GAUGE, "files",
            "Files mapped now by mapFile (their bytes are the file's, in no location's figures)"),
    MAPPED("compute.memory.mapped", Meter.Type.GAUGE, BaseUnits.BYTES, "Bytes of the files mapped now"),
    MAPPED_PEAK("compute.memory.mapped.peak", Meter.Type.GAUGE, BaseUnits.BYTES, "Peak of mapped bytes"),
    MAPPED_FILES_MAX("compute.memory.mapped.files.max", Meter.Type.GAUGE, null,
            "The most files that may be mapped at once: compute.memory.mapped-files.max-open"),
    MAPPINGS("compute.memory.mappings", Meter.Type.COUNTER, null, "Files (or ranges of one) mapped"),
    LEAKS("compute.memory.leaks", Meter.Type.COUNTER, null, "Buffers garbage-collected without close(), every one (the LEAK log has each allocation site's trace once)"),
    DEVICE_MEMORY_TOTAL("compute.device.memory.total", Meter.Type.GAUGE, BaseUnits.BYTES, "The device's memory, as the backend tells it"),
    DEVICE_MEMORY_FREE("compute.device.memory.free", Meter.Type.GAUGE, BaseUnits.BYTES, "The device's free memory (used by anyone), as the backend tells it");

    private final String name;
    private final Meter.Type type;
    private final @Nullable String baseUnit;
    private final String description;
    private final KeyName[] tags;

    ComputeMeters(String name, Meter.Type type, @Nullable String baseUnit, String description, Tag... tags) {
        this.name = name;
        this.type = type;
        this.baseUnit = baseUnit;
        this.description = description;
        this.tags = KeyName.merge(new KeyName[] {Tag.NAME, Tag.BACKEND, Tag.DEVICE}, tags);
    }

    @Override
    public String getName() {
        return name;
    }

    @Override
    public Meter.Type getType() {
        return type;
    }

    @Override
    public @Nullable String getBaseUnit() {
        return baseUnit;
    }

    @Override
    public KeyName[] getKeyNames() {
        return tags.clone();
    }

    /** What the meter says, as registered with it (MeterDocumentation keeps descriptions in Javadoc; ours are needed at run time). */
    public String description() {
        return description;
    }

    /** The tags, each on every meter that names it in {@link #getKeyNames()}. */
    public enum Tag implements KeyName {
        /** The manager's name: {@code gpu} for {@code compute.managers.gpu}, {@code default} for the one manager of {@code compute.*}. */
        NAME("name"),
        /** The backend: {@code cpu}, {@code cuda}, {@code opencl}. */
        BACKEND("backend"),
        /** The device index within the backend. */
        DEVICE("device"),
        /** {@code device}, {@code host}, {@code pinned}, {@code unified}. */
        LOCATION("location"),
        /** {@code host-to-device}, {@code device-to-host}, {@code device-to-device}. */
        DIRECTION("direction"),
        /** Why an allocation failed: {@code pool-limit}, {@code adaptor-limit}, {@code budget-limit}, {@code device-memory}, {@code device-work-stuck}. */
        REASON("reason"),
        /** {@code recovered} or {@code failed}. */
        OUTCOME("outcome"),
        /**
         * A configured budget's name ({@code compute.budgets.<name>}): only those are metered, never the budgets of requests
         * and tasks, so the tag's values are a bounded set.
         */
        BUDGET("budget");

        private final String key;

        Tag(String key) {
            this.key = key;
        }

        @Override
        public String asString() {
            return key;
        }
    }
}
