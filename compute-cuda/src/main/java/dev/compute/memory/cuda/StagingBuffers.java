package dev.compute.memory.cuda;

import static dev.compute.memory.cuda.DriverCalls.cuEventCreate;
import static dev.compute.memory.cuda.DriverCalls.cuEventDestroy;

import dev.compute.memory.spi.BackendOutOfMemoryException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import jcuda.driver.CUevent;
import jcuda.driver.CUevent_flags;
import jcuda.driver.JCudaDriver;
import org.jspecify.annotations.Nullable;

/**
 * The staging buffers for copies from and to ordinary Java memory (heap arrays, pageable segments), which the
 * GPU cannot read directly: staged through pinned slots by several host threads, such copies run several times
 * faster than the driver's own pageable path (the figures: docs/benchmarks.md). A copy borrows a {@link Lane} (two or more slots of {@code stagingBufferBytes} each, an
 * event per slot) and pipelines through it: while the device moves one slot, host threads fill the next. Lanes
 * are made on first use, up to {@code maxLanes} (concurrent staged copies beyond that wait for one), and kept
 * until the backend closes. Slots are pinned ({@code cuMemHostAlloc}) unless pinning is disabled, then
 * ordinary memory: still correct, and copies from heap arrays still work, at the pageable rate. Where pinned memory
 * is short (the driver answers out of memory: the host's page-locked limit is reached), a lane of ordinary memory
 * takes the pinned one's place, so that the copy is still done; it is swapped for a pinned lane as soon as one can be
 * had, when a copy takes it again.
 */
final class StagingBuffers implements AutoCloseable {

    /** One copy's staging: {@code slots()} buffers used in turn, each with the event that says the device is done with it. */
    static final class Lane {
        private final MemorySegment[] slots;
        private final HostPointer[] pointers;
        private final CUevent[] events;
        private final long slotBytes;
        private final @Nullable Arena pageable;

        private final DriverLibrary driver;

        private Lane(DriverLibrary driver, int slotCount, long slotBytes, boolean pinned) {
            this.driver = driver;
            this.slots = new MemorySegment[slotCount];
            this.pointers = new HostPointer[slotCount];
            this.events = new CUevent[slotCount];
            this.slotBytes = slotBytes;
            this.pageable = pinned ? null : Arena.ofShared();
            try {
                for (int i = 0; i < slotCount; i++) {
                    if (pinned) {
                        // through FFM, as PINNED allocations: JCuda's binding fails from 2 GiB on (DriverLibrary.hostAlloc)
                        HostPointer pointer = new HostPointer(driver.hostAlloc(slotBytes, JCudaDriver.CU_MEMHOSTALLOC_PORTABLE,
                                "cuMemHostAlloc(" + slotBytes + " bytes, staging buffer)"));
                        pointers[i] = pointer;
                        slots[i] = MemorySegment.ofAddress(pointer.address()).reinterpret(slotBytes);
                    } else {
                        slots[i] = pageable.allocate(slotBytes, 64);
                        pointers[i] = new HostPointer(slots[i].address());
                    }
                    CUevent event = new CUevent();
                    CudaResults.check(cuEventCreate(event, CUevent_flags.CU_EVENT_BLOCKING_SYNC | CUevent_flags.CU_EVENT_DISABLE_TIMING),
                            "cuEventCreate");
                    events[i] = event;
                }
            } catch (RuntimeException | Error e) { // an OutOfMemoryError of the pageable slots' arena too
                free();
                throw e;
            }
        }

        int slots() {
            return slots.length;
        }

        /** Whether the slots are page-locked; else the driver's copy from or to them waits for the stream's earlier work. */
        boolean pinned() {
            return pageable == null;
        }

        long slotBytes() {
            return slotBytes;
        }

        MemorySegment slot(int i) {
            return slots[i];
        }

        HostPointer pointer(int i) {
            return pointers[i];
        }

        CUevent event(int i) {
            return events[i];
        }

        private void free() {
            for (int i = 0; i < slots.length; i++) {
                if (events[i] != null) {
                    cuEventDestroy(events[i]);
                }
                if (pageable == null && pointers[i] != null) {
                    driver.freeHost(pointers[i].address());
                }
            }
            if (pageable != null) {
                pageable.close();
            }
        }
    }

    static final int MIN_SLOTS = 2;

    private static final System.Logger LOG = System.getLogger(StagingBuffers.class.getName());

    private final CudaContext context;
    private final long slotBytes;
    private final int slotsPerLane;
    private final int maxLanes;
    private final boolean pinned;
    private final LinkedBlockingQueue<Lane> idle = new LinkedBlockingQueue<>();
    private final List<Lane> all = new ArrayList<>();
    /** Whether the last pinned lane tried could not be made (said once, when it begins); guarded by this. */
    private boolean pinnedMemoryShort;

    StagingBuffers(CudaContext context, long slotBytes, int slotsPerLane, int maxLanes, boolean pinned) {
        if (slotBytes <= 0) {
            throw new IllegalArgumentException("a staging buffer needs a positive size: " + slotBytes);
        }
        if (slotsPerLane < MIN_SLOTS) {
            throw new IllegalArgumentException("staging needs at least " + MIN_SLOTS + " buffers per copy to overlap host and device work: " + slotsPerLane);
        }
        if (maxLanes < 1) {
            throw new IllegalArgumentException("at least one staging lane is needed: " + maxLanes);
        }
        this.context = context;
        this.slotBytes = slotBytes;
        this.slotsPerLane = slotsPerLane;
        this.maxLanes = maxLanes;
        this.pinned = pinned;
    }

    boolean pinned() {
        return pinned;
    }

    long slotBytes() {
        return slotBytes;
    }

    int slotsPerLane() {
        return slotsPerLane;
    }

    /**
     * A lane for one copy, waiting while {@code maxLanes} copies are staging, at most until {@code deadline}
     * ({@link System#nanoTime}); null past it. A lane is held until its copy's device work is done, which may be
     * never (a copy queued behind a kernel that never ends), so the wait must be bounded.
     */
    @Nullable Lane acquire(long deadline) {
        while (true) {
            Lane lane = idle.poll();
            if (lane != null) {
                return pinned && !lane.pinned() ? pinnedInPlaceOf(lane) : lane;
            }
            synchronized (this) {
                if (all.size() < maxLanes) {
                    context.makeCurrent();
                    Lane created = pinned ? pinnedOrPageable() : new Lane(context.driver, slotsPerLane, slotBytes, false);
                    all.add(created);
                    return created;
                }
            }
            long left = deadline - System.nanoTime();
            if (left <= 0) {
                return null;
            }
            try {
                // in slices: a lane abandoned meanwhile makes room for a new one, which no release announces
                lane = idle.poll(Math.min(left, TimeUnit.MILLISECONDS.toNanos(10)), TimeUnit.NANOSECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted while waiting for a staging buffer", e);
            }
            if (lane != null) {
                return pinned && !lane.pinned() ? pinnedInPlaceOf(lane) : lane;
            }
        }
    }

    /**
     * A pinned lane, or where the driver has no page-locked memory for one, a lane of ordinary memory: the copy is still
     * done, at the pageable rate, rather than fail for want of memory it does not need.
     */
    private synchronized Lane pinnedOrPageable() {
        Lane lane = pinnedOrNull();
        return lane != null ? lane : new Lane(context.driver, slotsPerLane, slotBytes, false);
    }

    /** An idle lane of ordinary memory made while pinned memory was short: swapped for a pinned one where that can be had now. */
    private synchronized Lane pinnedInPlaceOf(Lane pageable) {
        Lane lane = pinnedOrNull();
        if (lane == null) {
            return pageable;
        }
        all.remove(pageable);
        pageable.free(); // idle: the device is done with its slots
        all.add(lane);
        return lane;
    }

    /** A pinned lane, made with the context current; null where the driver has no page-locked memory for it (said once). */
    private synchronized @Nullable Lane pinnedOrNull() {
        context.makeCurrent();
        try {
            Lane lane = new Lane(context.driver, slotsPerLane, slotBytes, true);
            pinnedMemoryShort = false;
            return lane;
        } catch (BackendOutOfMemoryException e) {
            if (!pinnedMemoryShort) {
                pinnedMemoryShort = true;
                LOG.log(System.Logger.Level.WARNING, "no page-locked memory for a staging buffer (" + e.getMessage() + "): copies"
                        + " from and to ordinary Java memory are staged through ordinary memory, at the pageable rate, until"
                        + " page-locked memory can be had again");
            }
            return null;
        }
    }

    /** Gives a lane back; the device must be done with all of its slots. */
    void release(Lane lane) {
        idle.add(lane);
    }

    /**
     * Takes a lane out of use for good: the device may still read or write its slots (copies queued behind work that
     * did not end in time), so it is neither reused nor freed, not even by {@link #close()}; a new lane may take its place.
     */
    synchronized void abandon(Lane lane) {
        all.remove(lane);
    }

    /** Frees every lane; no copy may be staging. */
    @Override
    public synchronized void close() {
        context.makeCurrent();
        for (Lane lane : all) {
            lane.free();
        }
        all.clear();
        idle.clear();
    }
}
