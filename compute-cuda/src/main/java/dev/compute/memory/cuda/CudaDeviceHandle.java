package dev.compute.memory.cuda;

import dev.compute.memory.spi.DeviceHandle;
import dev.compute.memory.spi.WorkGroup;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import jcuda.driver.CUdeviceptr;
import jcuda.driver.CUstream;

/**
 * The CUDA side of a device access, for one's own kernels and CUDA libraries on pooled memory:
 * {@code buffer.deviceAccess(mode)}, then {@code access.handle(CudaDeviceHandle.class)}. It is opened on the
 * thread that opens the access, with the device's primary context made current there, so launches from that
 * thread run in the context the memory belongs to.
 *
 * <table>
 *   <caption>What {@link #pointer()} is at each location</caption>
 *   <tr><th>location</th><th>the pointer is</th><th>kernels can reach it</th></tr>
 *   <tr><td>DEVICE</td><td>device memory ({@code cuMemAlloc}, or pages mapped into a reserved range)</td><td>yes</td></tr>
 *   <tr><td>PINNED</td><td>page-locked host memory mapped into the device's address space ({@code cuMemHostAlloc}
 *       with {@code DEVICEMAP}); the same address as on the host, under unified addressing</td><td>yes, over PCIe</td></tr>
 *   <tr><td>UNIFIED</td><td>managed memory ({@code cuMemAllocManaged}); pages migrate on touch</td><td>yes</td></tr>
 *   <tr><td>HOST</td><td>none: ordinary off-heap memory, which the device cannot address; opening the access
 *       fails with an {@link IllegalArgumentException}: allocate in DEVICE, PINNED or UNIFIED memory, or use a host
 *       access</td><td>no</td></tr>
 * </table>
 *
 * <p><b>The rule.</b> The pointer, and any address derived from it, must not be used after the access ends: the
 * memory may then go back to the pool and be handed to another buffer. Work queued before the end is safe: the
 * access's end records it, and the buffer's memory is neither reused nor read by the host until the device has
 * finished it. The handle's own methods fail with an {@link IllegalStateException} once the access has ended.
 *
 * <p><b>Ordering.</b> Queue work on {@link #stream()}: it is the stream this backend orders the calling thread's
 * copies and kernels on, and the access has ordered it, on the device, after the buffer's earlier work on other
 * streams ({@code cuStreamWaitEvent}; the host does not wait), so the work runs after whatever brought the bytes to
 * the device and before the copies that follow the access. On a stream of one's own (of this device's primary
 * context), call {@link #orderStream} first, so it waits for the same, and {@link #recordWork} after queueing: the
 * access's end then waits for that work too.
 *
 * <p>Thread-safe; {@link #stream()} is the stream of the thread that opened the access.
 */
public final class CudaDeviceHandle implements DeviceHandle {

    /** The backend's streams, where the access's end and the work of one's own are recorded while it is open. */
    private final CudaStreams streams;
    private final long address;
    private final long byteSize;
    private final CUstream stream;
    private final int deviceOrdinal;
    /** Events recorded on the user's own streams, joined into what {@link #end()} returns. */
    private final List<CompletableFuture<Void>> recorded = new ArrayList<>();
    private boolean open = true;

    CudaDeviceHandle(CudaStreams streams, long address, long byteSize, CUstream stream, int deviceOrdinal) {
        this.streams = streams;
        this.address = address;
        this.byteSize = byteSize;
        this.stream = stream;
        this.deviceOrdinal = deviceOrdinal;
    }

    /** The access's first byte as a JCuda device pointer (a new object on each call: JCuda calls may overwrite one). */
    public synchronized CUdeviceptr pointer() {
        checkOpen();
        return new DevicePointer(address);
    }

    /** The access's first byte as a raw device address: the allocation's address plus the access's offset. */
    public synchronized long address() {
        checkOpen();
        return address;
    }

    /** How many bytes from {@link #address()} belong to the access. */
    public long byteSize() {
        return byteSize;
    }

    /** The stream the backend orders the opening thread's copies and kernels on: queue the access's work here. */
    public synchronized CUstream stream() {
        checkOpen();
        return stream;
    }

    /** The CUDA device ordinal the memory lives on. */
    public int deviceOrdinal() {
        return deviceOrdinal;
    }

    /**
     * Says work on these bytes was queued on {@code userStream}, a stream of one's own in this device's primary
     * context: an event recorded there now joins what the access's end waits for. Call it after queueing the work.
     */
    public synchronized void recordWork(CUstream userStream) {
        Objects.requireNonNull(userStream, "userStream");
        checkOpen();
        CompletableFuture<Void> done = streams.recordWhileOpen(userStream);
        if (done == null) {
            throw new IllegalStateException("the CUDA backend (device " + deviceOrdinal + ") is closed; no work can be recorded");
        }
        recorded.add(done);
    }

    /**
     * Makes {@code yours}, a stream of one's own, wait on the device for what {@link #stream()} has queued so far (and so
     * for the buffer's earlier work, which the access ordered that stream after): call it before queueing work on the
     * bytes on {@code yours}. The host does not wait.
     */
    public synchronized void orderStream(CUstream yours) {
        Objects.requireNonNull(yours, "yours");
        checkOpen();
        if (yours != stream && !streams.orderStreamWhileOpen(yours, stream)) {
            throw new IllegalStateException("the CUDA backend (device " + deviceOrdinal + ") is closed; no stream can be ordered");
        }
    }

    /**
     * Ends the handle (the access calls it once, as it ends): a position on {@link #stream()} now (no driver call:
     * {@link DeviceCompletions#position}), joined with the events of {@link #recordWork}; the future completes when the
     * device has finished all of it.
     */
    @Override
    public synchronized CompletableFuture<Void> end() {
        checkOpen();
        open = false;
        streams.handleEnded();
        CompletableFuture<Void> queued = streams.positionWhileOpen(stream);
        if (queued == null) {
            // the backend closed while this access was open: its streams are gone and nothing can be recorded; a
            // manager closes its backend under an open access only after keeping the buffer's memory, unfreed
            queued = CompletableFuture.completedFuture(null);
        }
        if (recorded.isEmpty()) {
            return queued;
        }
        recorded.add(queued);
        return WorkGroup.of(recorded);
    }

    private void checkOpen() {
        if (!open) {
            throw new IllegalStateException("this CUDA handle's access has ended; its pointer must not be used any more");
        }
    }

    @Override
    public synchronized String toString() {
        return "CudaDeviceHandle[device " + deviceOrdinal + ", " + byteSize + " bytes at 0x" + Long.toHexString(address)
                + (open ? "" : ", ended") + "]";
    }
}
