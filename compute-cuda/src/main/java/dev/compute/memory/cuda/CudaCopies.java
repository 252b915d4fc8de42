package dev.compute.memory.cuda;

import static dev.compute.memory.cuda.DriverCalls.cuEventRecord;
import static dev.compute.memory.cuda.DriverCalls.cuMemAlloc;
import static dev.compute.memory.cuda.DriverCalls.cuMemFree;
import static dev.compute.memory.cuda.DriverCalls.cuMemcpyAsync;
import static dev.compute.memory.cuda.DriverCalls.cuMemcpyDtoHAsync;
import static dev.compute.memory.cuda.DriverCalls.cuMemcpyHtoDAsync;

import dev.compute.memory.DeviceTimeoutException;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.spi.FileMappings;
import dev.compute.memory.spi.NativeAllocation;
import dev.compute.memory.spi.QueuedWorkTimeoutException;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.CompletableFuture;
import jcuda.driver.CUstream;

/**
 * The backend's copies, each on the calling thread's stream. Between device, pinned and managed memory the driver
 * copies directly ({@code cuMemcpyAsync}); host memory on both sides is copied by the host, after the thread's queued
 * device work; anything else (heap arrays, pageable segments, mapped files) goes through a staging lane of
 * {@link StagingBuffers}, whose slots host threads fill while the device empties the previous one. A segment over a
 * mapped file ({@link FileMappings#isOverMapping}) always takes a lane, never the driver's pageable path, so a file
 * truncated under its mapping fails the copy in Java instead of ending the process in the driver.
 */
final class CudaCopies {

    /** Whether a copy returns once it is done, or once it is queued (a future says when it is done). */
    enum Completion { WAIT, QUEUE }

    private static final CompletableFuture<Void> DONE = CompletableFuture.completedFuture(null);

    private final CudaStreams streams;
    /** Which host memory the device reads directly: the backend's PINNED and UNIFIED allocations. */
    private final CudaAllocator allocations;
    private final DeviceCompletions completions;
    private final HostCopier copier;
    private final StagingBuffers staging;

    CudaCopies(CudaStreams streams, CudaAllocator allocations, DeviceCompletions completions, HostCopier copier, StagingBuffers staging) {
        this.streams = streams;
        this.allocations = allocations;
        this.completions = completions;
        this.copier = copier;
        this.staging = staging;
    }

    /** A copy between two allocations: by the host or the driver, as they are; returns once it is done. */
    void withinDevice(NativeAllocation source, long sourceOffset, NativeAllocation target, long targetOffset, long bytes) {
        Checks.range(source, sourceOffset, bytes, "source");
        Checks.range(target, targetOffset, bytes, "target");
        if (bytes == 0) {
            return;
        }
        if (target.location() == MemoryLocation.HOST) {
            toHost(source, sourceOffset, hostSegment(target).asSlice(targetOffset, bytes), bytes, Completion.WAIT);
        } else if (source.location() == MemoryLocation.HOST) {
            toDevice(hostSegment(source).asSlice(sourceOffset, bytes), target, targetOffset, bytes, Completion.WAIT);
        } else {
            CUstream stream = streams.enter();
            completions.await(stream); // bounded, before anything is queued: see toDevice
            long from = source.address() + sourceOffset;
            long to = target.address() + targetOffset;
            if (from < to + bytes && to < from + bytes) {
                overlapping(from, to, bytes, stream);
                return;
            }
            CudaResults.check(cuMemcpyAsync(new DevicePointer(to), new DevicePointer(from), bytes, stream),
                    "cuMemcpyAsync(" + bytes + " bytes, " + source.location() + " to " + target.location() + ")");
            awaitQueued(stream);
        }
    }

    /**
     * A copy between overlapping ranges of one allocation, as memmove: the driver leaves the result of overlapping
     * ranges undefined (its copy engines move blocks in no promised order), so the bytes go through a temporary.
     */
    private void overlapping(long from, long to, long bytes, CUstream stream) {
        DevicePointer temporary = new DevicePointer();
        CudaResults.check(cuMemAlloc(temporary, bytes), "cuMemAlloc(" + bytes + " bytes, temporary of an overlapping copy)");
        try {
            CudaResults.check(cuMemcpyAsync(temporary, new DevicePointer(from), bytes, stream), "cuMemcpyAsync(" + bytes + " bytes, to a temporary)");
            CudaResults.check(cuMemcpyAsync(new DevicePointer(to), temporary, bytes, stream), "cuMemcpyAsync(" + bytes + " bytes, from a temporary)");
            awaitQueued(stream);
        } catch (DeviceTimeoutException stillQueued) {
            throw stillQueued; // the device may still use the temporary: it is kept, never freed
        } catch (RuntimeException e) {
            if (completions.awaitQuietly(stream)) {
                cuMemFree(temporary);
            }
            throw e;
        }
        cuMemFree(temporary);
    }

    private static MemorySegment hostSegment(NativeAllocation allocation) {
        MemorySegment segment = allocation.hostSegment();
        if (segment == null) {
            throw new IllegalArgumentException(allocation.location() + " allocation has no host view");
        }
        return segment;
    }

    /** A copy to an allocation: from pinned or managed memory by the driver, from anything else through a staging lane. */
    CompletableFuture<Void> toDevice(MemorySegment source, NativeAllocation target, long targetOffset, long bytes, Completion completion) {
        Checks.segment(source, bytes, "source");
        Checks.range(target, targetOffset, bytes, "target");
        if (bytes == 0) {
            return DONE;
        }
        CUstream stream = streams.enter();
        if (target.location() == MemoryLocation.HOST || target.location() == MemoryLocation.PINNED) {
            // host memory on both sides: a host copy, after this thread's queued device work on the target
            completions.await(stream);
            copier.copy(source, 0, hostSegment(target), targetOffset, bytes);
            return DONE;
        }
        long destination = target.address() + targetOffset;
        if (allocations.deviceVisible(source, bytes)) {
            if (completion == Completion.WAIT) {
                // a synchronous copy first waits, bounded, for the work queued ahead of it (a kernel that never ends,
                // a wait on an event nobody records): timing out then leaves nothing queued that writes the target later
                completions.await(stream);
            }
            CudaResults.check(cuMemcpyAsync(new DevicePointer(destination), new DevicePointer(source.address()), bytes, stream),
                    "cuMemcpyAsync(" + bytes + " bytes to " + target.location() + ")");
            return finish(stream, completion);
        }
        if (source.isNative() && !staging.pinned() && !FileMappings.isOverMapping(source)) {
            // pinning is off: the driver's own pageable path (it stages internally); never over a mapped file, whose
            // truncation would fault in the driver and end the process, where a copy by Java throws. The driver may
            // block in the call until earlier work is done: the bounded wait first
            completions.await(stream);
            CudaResults.check(cuMemcpyHtoDAsync(new DevicePointer(destination), new HostPointer(source.address()), bytes, stream),
                    "cuMemcpyHtoDAsync(" + bytes + " bytes, pageable)");
            return finish(stream, completion);
        }
        return stagedToDevice(source, destination, bytes, stream, completion);
    }

    /** A copy from an allocation, as {@link #toDevice}; a copy to pageable memory is done when this returns, whatever asked. */
    CompletableFuture<Void> toHost(NativeAllocation source, long sourceOffset, MemorySegment target, long bytes, Completion completion) {
        Checks.range(source, sourceOffset, bytes, "source");
        Checks.segment(target, bytes, "target");
        if (bytes == 0) {
            return DONE;
        }
        CUstream stream = streams.enter();
        if (source.location() == MemoryLocation.HOST || source.location() == MemoryLocation.PINNED) {
            completions.await(stream);
            copier.copy(hostSegment(source), sourceOffset, target, 0, bytes);
            return DONE;
        }
        long origin = source.address() + sourceOffset;
        if (allocations.deviceVisible(target, bytes)) {
            if (completion == Completion.WAIT) {
                completions.await(stream); // bounded, before anything is queued: see toDevice
            }
            CudaResults.check(cuMemcpyAsync(new DevicePointer(target.address()), new DevicePointer(origin), bytes, stream),
                    "cuMemcpyAsync(" + bytes + " bytes from " + source.location() + ")");
            return finish(stream, completion);
        }
        if (target.isNative() && !staging.pinned() && !FileMappings.isOverMapping(target)) {
            // returns once the bytes have landed: the driver copies to pageable memory synchronously, so the work
            // queued ahead is waited for first, bounded
            completions.await(stream);
            CudaResults.check(cuMemcpyDtoHAsync(new HostPointer(target.address()), new DevicePointer(origin), bytes, stream),
                    "cuMemcpyDtoHAsync(" + bytes + " bytes, pageable)");
            return finish(stream, Completion.WAIT);
        }
        stagedToHost(origin, target, bytes, stream);
        return DONE;
    }

    private CompletableFuture<Void> finish(CUstream stream, Completion completion) {
        if (completion == Completion.WAIT) {
            awaitQueued(stream); // the copy itself, after the bounded wait for what was queued ahead
            return DONE;
        }
        return completions.record(stream);
    }

    /** The bounded wait for a copy already queued on {@code stream}: past it, the timeout says when the copy is done. */
    private void awaitQueued(CUstream stream) {
        try {
            completions.await(stream);
        } catch (DeviceTimeoutException e) {
            throw leftQueued(e, stream);
        }
    }

    /**
     * {@code timeout} of a wait after this call queued work on {@code stream}, which may still read or write the memory
     * the call was given: with a future for that work, which the manager keeps as in flight on the buffers it uses.
     */
    private QueuedWorkTimeoutException leftQueued(DeviceTimeoutException timeout, CUstream stream) {
        CompletableFuture<Void> queued;
        try {
            streams.makeCurrent(); // after the wait, which may have moved a virtual thread to another carrier
            queued = completions.record(stream); // behind the queued copy on its stream
        } catch (RuntimeException e) {
            timeout.addSuppressed(e);
            queued = new CompletableFuture<>(); // never known to be past: the memory stays out of the pool
        }
        QueuedWorkTimeoutException leftQueued = new QueuedWorkTimeoutException(timeout.getMessage(), timeout.waited(), queued);
        for (Throwable suppressed : timeout.getSuppressed()) {
            leftQueued.addSuppressed(suppressed);
        }
        return leftQueued;
    }

    /**
     * Pageable memory → device through a staging lane: host threads fill slot {@code k % slots} while the
     * device copies the previous one; a slot is refilled once its event says the device has read it. Each wait for
     * the device is bounded on its own, from when it begins: the copy as a whole takes as long as its size and its
     * source need (a file on a slow disk), which is no sign of a stuck device.
     */
    private CompletableFuture<Void> stagedToDevice(MemorySegment source, long destination, long bytes, CUstream stream, Completion completion) {
        long deadline = completions.deadline();
        long chunk0 = staging.slotBytes();
        if (completion == Completion.WAIT || Math.ceilDiv(bytes, chunk0) > staging.slotsPerLane()) {
            // this call will wait for the device: first, bounded, for the work queued ahead of it, with nothing queued yet
            completions.await(stream, deadline);
        }
        StagingBuffers.Lane lane = staging.acquire(deadline);
        if (lane == null) {
            throw completions.timeout("staged copies holding every staging lane");
        }
        long chunk = lane.slotBytes();
        long chunks = Math.ceilDiv(bytes, chunk);
        boolean queued = false;
        try {
            for (long k = 0; k < chunks; k++) {
                int slot = (int) (k % lane.slots());
                long offset = k * chunk;
                long length = Math.min(chunk, bytes - offset);
                if (k >= lane.slots() && !DeviceCompletions.awaitEvent(lane.event(slot), completions.deadline(), "cuEventQuery(staging buffer)")) {
                    throw completions.timeout("a staged copy's earlier chunk");
                }
                copier.copy(source, offset, lane.slot(slot), 0, length);
                FileMappings.surfaceFaults(); // a fault of the copy (a truncated mapped file) is thrown here, in the try
                readyToQueue(lane, stream);
                CudaResults.check(cuMemcpyHtoDAsync(new DevicePointer(destination + offset), lane.pointer(slot), length, stream),
                        "cuMemcpyHtoDAsync(" + length + " bytes, staged)");
                queued = true;
                CudaResults.check(cuEventRecord(lane.event(slot), stream), "cuEventRecord(staging buffer)");
            }
            if (completion == Completion.WAIT) {
                completions.await(stream);
                staging.release(lane);
                return DONE;
            }
            CompletableFuture<Void> done = completions.record(stream);
            done.whenComplete((ignored, failure) -> staging.release(lane));
            return done;
        } catch (DeviceTimeoutException e) {
            throw timedOut(lane, stream, queued, e);
        } catch (RuntimeException | Error e) {
            giveBack(lane, stream, queued, e);
            throw e;
        }
    }

    /**
     * What a staged copy throws when a wait timed out: once chunks are queued the device may still read the lane's
     * slots and write the copy's target (or read its source), so the lane is never reused and the timeout carries the
     * queued work, whose memory is kept until the device is past it; with none queued the lane goes back.
     */
    private DeviceTimeoutException timedOut(StagingBuffers.Lane lane, CUstream stream, boolean queued, DeviceTimeoutException timeout) {
        if (!queued) {
            staging.release(lane);
            return timeout;
        }
        staging.abandon(lane);
        return leftQueued(timeout, stream);
    }

    /**
     * Returns a lane after a failure other than a timeout once the device is past what was queued on it, or takes it
     * out of use for good where that did not happen within the device wait: then {@code failure} carries the timeout,
     * with the chunks left queued, so that the memory they use is kept too.
     */
    private void giveBack(StagingBuffers.Lane lane, CUstream stream, boolean queued, Throwable failure) {
        try {
            completions.await(stream);
            staging.release(lane);
        } catch (DeviceTimeoutException stillRunning) {
            staging.abandon(lane);
            if (queued) {
                failure.addSuppressed(leftQueued(stillRunning, stream));
            }
        } catch (RuntimeException ignored) {
            // a failed context reports the first error again; the caller is already throwing it. Nothing runs on it any more
            staging.abandon(lane);
        }
    }

    /**
     * Device → pageable memory: the first slots are queued at once, each is copied out and refilled as its event
     * completes; each wait bounded on its own, as in {@link #stagedToDevice}.
     */
    private void stagedToHost(long origin, MemorySegment target, long bytes, CUstream stream) {
        long deadline = completions.deadline();
        completions.await(stream, deadline); // bounded, with nothing queued yet: see toDevice
        StagingBuffers.Lane lane = staging.acquire(deadline);
        if (lane == null) {
            throw completions.timeout("staged copies holding every staging lane");
        }
        long chunk = lane.slotBytes();
        long chunks = Math.ceilDiv(bytes, chunk);
        boolean queued = false;
        try {
            for (long k = 0; k < Math.min(lane.slots(), chunks); k++) {
                readyToQueue(lane, stream);
                queueToSlot(lane, k, origin, bytes, stream);
                queued = true;
            }
            for (long k = 0; k < chunks; k++) {
                int slot = (int) (k % lane.slots());
                long offset = k * chunk;
                if (!DeviceCompletions.awaitEvent(lane.event(slot), completions.deadline(), "cuEventQuery(staging buffer)")) {
                    throw completions.timeout("a staged copy's chunk");
                }
                copier.copy(lane.slot(slot), 0, target, offset, Math.min(chunk, bytes - offset));
                FileMappings.surfaceFaults();
                if (k + lane.slots() < chunks) {
                    readyToQueue(lane, stream);
                    queueToSlot(lane, k + lane.slots(), origin, bytes, stream);
                }
            }
        } catch (DeviceTimeoutException e) {
            throw timedOut(lane, stream, queued, e);
        } catch (RuntimeException | Error e) {
            giveBack(lane, stream, queued, e);
            throw e;
        }
        staging.release(lane);
    }

    /**
     * Before a chunk is queued, after the waits for the lane, the slot's event and the host copy's threads: makes the
     * context current again, and with pageable slots (pinning off, or pinned memory short) waits, bounded, for the work
     * queued ahead on the stream (another thread's too, on a shared stream): the driver's copy from or to pageable memory
     * waits for it in the call, where no device wait bounds it.
     */
    private void readyToQueue(StagingBuffers.Lane lane, CUstream stream) {
        if (lane.pinned()) {
            streams.makeCurrent();
        } else {
            completions.await(stream);
        }
    }

    private static void queueToSlot(StagingBuffers.Lane lane, long k, long origin, long bytes, CUstream stream) {
        int slot = (int) (k % lane.slots());
        long offset = k * lane.slotBytes();
        long length = Math.min(lane.slotBytes(), bytes - offset);
        CudaResults.check(cuMemcpyDtoHAsync(lane.pointer(slot), new DevicePointer(origin + offset), length, stream),
                "cuMemcpyDtoHAsync(" + length + " bytes, staged)");
        CudaResults.check(cuEventRecord(lane.event(slot), stream), "cuEventRecord(staging buffer)");
    }
}
