package dev.compute.memory;

import dev.compute.memory.resource.Block;
import dev.compute.memory.spi.NativeAllocation;
import dev.compute.memory.spi.Region;
import java.lang.foreign.MemorySegment;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import org.jspecify.annotations.Nullable;

/**
 * A block of compute memory from a {@link UnifiedMemoryManager}. Close it when done (try-with-resources);
 * closing twice is harmless and any other use after close fails with an {@link IllegalStateException}.
 *
 * <p><b>Where the data is.</b> On memory the host can address (every location of the CPU backend; HOST,
 * PINNED and UNIFIED on accelerators) there is one copy: syncs do nothing and host views are the memory itself.
 * On accelerator memory the device copy is the buffer, and a host mirror is made on first need (from the
 * pinned pool when pinning is on). {@link #state()} says which copy is newer; syncs are lazy (the op set and
 * the host views sync what they need) and explicit ones exist. Copies from and to arrays go to whichever copy
 * is newer, so they never force a sync of the whole buffer.
 *
 * <p>A writable host view marks the host copy newer when it is taken; writes made through a view after a later
 * sync are not seen: take a fresh view after device work. A read-only view leaves the state as it is.
 *
 * <p>Thread-safe: one buffer's transitions are serialised on the buffer.
 */
public final class UnifiedBuffer implements AutoCloseable {

    private static final CompletableFuture<Void> DONE = CompletableFuture.completedFuture(null);

    private final PooledMemoryManager manager;
    private final MemoryLocation location;
    private final DataType dataType;
    private final long byteSize;
    private @Nullable Block block;
    private @Nullable Block mirror;
    private BufferState state = BufferState.UNINITIALIZED;
    private CompletableFuture<?> inFlight = DONE;
    private final LeakDetector.@Nullable Tracker leakTracker;

    UnifiedBuffer(PooledMemoryManager manager, MemoryLocation location, DataType dataType, long byteSize, Block block,
                  LeakDetector.@Nullable Tracker leakTracker) {
        this.manager = manager;
        this.location = location;
        this.dataType = dataType;
        this.byteSize = byteSize;
        this.block = block;
        this.leakTracker = leakTracker;
    }

    public MemoryLocation location() {
        return location;
    }

    /** The element type it was allocated by; {@link DataType#INT8} for buffers allocated by bytes. */
    public DataType dataType() {
        return dataType;
    }

    /** The bytes asked for (the pool may have set aside a little more). */
    public long byteSize() {
        return byteSize;
    }

    public long elementCount() {
        return byteSize / dataType.byteSize();
    }

    public synchronized BufferState state() {
        return state;
    }

    public synchronized boolean isClosed() {
        return block == null;
    }

    /** True when host and device share this buffer's memory: one copy, syncs cost nothing. */
    public boolean isHostAccessible() {
        return manager.hostAccessible(location);
    }

    /** The manager that made this buffer. */
    public UnifiedMemoryManager manager() {
        return manager;
    }

    /** Writes all of {@code source} at the start of this buffer. */
    public void copyFrom(byte[] source) {
        copyFrom(0, source, 0, source.length);
    }

    /** Writes {@code length} elements of {@code source} from {@code sourceIndex} at {@code byteOffset} of this buffer. */
    public void copyFrom(long byteOffset, byte[] source, int sourceIndex, int length) {
        Objects.checkFromIndexSize(sourceIndex, length, source.length);
        write(byteOffset, MemorySegment.ofArray(source).asSlice((long) sourceIndex * 1, (long) length * 1));
    }

    /** Reads {@code destination.length} elements from the start of this buffer. */
    public void copyTo(byte[] destination) {
        copyTo(0, destination, 0, destination.length);
    }

    /** Reads {@code length} elements at {@code byteOffset} of this buffer into {@code destination} from {@code destinationIndex}. */
    public void copyTo(long byteOffset, byte[] destination, int destinationIndex, int length) {
        Objects.checkFromIndexSize(destinationIndex, length, destination.length);
        read(byteOffset, MemorySegment.ofArray(destination).asSlice((long) destinationIndex * 1, (long) length * 1));
    }

    /** Writes all of {@code source} at the start of this buffer. */
    public void copyFrom(short[] source) {
        copyFrom(0, source, 0, source.length);
    }

    /** Writes {@code length} elements of {@code source} from {@code sourceIndex} at {@code byteOffset} of this buffer. */
    public void copyFrom(long byteOffset, short[] source, int sourceIndex, int length) {
        Objects.checkFromIndexSize(sourceIndex, length, source.length);
        write(byteOffset, MemorySegment.ofArray(source).asSlice((long) sourceIndex * 2, (long) length * 2));
    }

    /** Reads {@code destination.length} elements from the start of this buffer. */
    public void copyTo(short[] destination) {
        copyTo(0, destination, 0, destination.length);
    }

    /** Reads {@code length} elements at {@code byteOffset} of this buffer into {@code destination} from {@code destinationIndex}. */
    public void copyTo(long byteOffset, short[] destination, int destinationIndex, int length) {
        Objects.checkFromIndexSize(destinationIndex, length, destination.length);
        read(byteOffset, MemorySegment.ofArray(destination).asSlice((long) destinationIndex * 2, (long) length * 2));
    }

    /** Writes all of {@code source} at the start of this buffer. */
    public void copyFrom(char[] source) {
        copyFrom(0, source, 0, source.length);
    }

    /** Writes {@code length} elements of {@code source} from {@code sourceIndex} at {@code byteOffset} of this buffer. */
    public void copyFrom(long byteOffset, char[] source, int sourceIndex, int length) {
        Objects.checkFromIndexSize(sourceIndex, length, source.length);
        write(byteOffset, MemorySegment.ofArray(source).asSlice((long) sourceIndex * 2, (long) length * 2));
    }

    /** Reads {@code destination.length} elements from the start of this buffer. */
    public void copyTo(char[] destination) {
        copyTo(0, destination, 0, destination.length);
    }

    /** Reads {@code length} elements at {@code byteOffset} of this buffer into {@code destination} from {@code destinationIndex}. */
    public void copyTo(long byteOffset, char[] destination, int destinationIndex, int length) {
        Objects.checkFromIndexSize(destinationIndex, length, destination.length);
        read(byteOffset, MemorySegment.ofArray(destination).asSlice((long) destinationIndex * 2, (long) length * 2));
    }

    /** Writes all of {@code source} at the start of this buffer. */
    public void copyFrom(int[] source) {
        copyFrom(0, source, 0, source.length);
    }

    /** Writes {@code length} elements of {@code source} from {@code sourceIndex} at {@code byteOffset} of this buffer. */
    public void copyFrom(long byteOffset, int[] source, int sourceIndex, int length) {
        Objects.checkFromIndexSize(sourceIndex, length, source.length);
        write(byteOffset, MemorySegment.ofArray(source).asSlice((long) sourceIndex * 4, (long) length * 4));
    }

    /** Reads {@code destination.length} elements from the start of this buffer. */
    public void copyTo(int[] destination) {
        copyTo(0, destination, 0, destination.length);
    }

    /** Reads {@code length} elements at {@code byteOffset} of this buffer into {@code destination} from {@code destinationIndex}. */
    public void copyTo(long byteOffset, int[] destination, int destinationIndex, int length) {
        Objects.checkFromIndexSize(destinationIndex, length, destination.length);
        read(byteOffset, MemorySegment.ofArray(destination).asSlice((long) destinationIndex * 4, (long) length * 4));
    }

    /** Writes all of {@code source} at the start of this buffer. */
    public void copyFrom(long[] source) {
        copyFrom(0, source, 0, source.length);
    }

    /** Writes {@code length} elements of {@code source} from {@code sourceIndex} at {@code byteOffset} of this buffer. */
    public void copyFrom(long byteOffset, long[] source, int sourceIndex, int length) {
        Objects.checkFromIndexSize(sourceIndex, length, source.length);
        write(byteOffset, MemorySegment.ofArray(source).asSlice((long) sourceIndex * 8, (long) length * 8));
    }

    /** Reads {@code destination.length} elements from the start of this buffer. */
    public void copyTo(long[] destination) {
        copyTo(0, destination, 0, destination.length);
    }

    /** Reads {@code length} elements at {@code byteOffset} of this buffer into {@code destination} from {@code destinationIndex}. */
    public void copyTo(long byteOffset, long[] destination, int destinationIndex, int length) {
        Objects.checkFromIndexSize(destinationIndex, length, destination.length);
        read(byteOffset, MemorySegment.ofArray(destination).asSlice((long) destinationIndex * 8, (long) length * 8));
    }

    /** Writes all of {@code source} at the start of this buffer. */
    public void copyFrom(float[] source) {
        copyFrom(0, source, 0, source.length);
    }

    /** Writes {@code length} elements of {@code source} from {@code sourceIndex} at {@code byteOffset} of this buffer. */
    public void copyFrom(long byteOffset, float[] source, int sourceIndex, int length) {
        Objects.checkFromIndexSize(sourceIndex, length, source.length);
        write(byteOffset, MemorySegment.ofArray(source).asSlice((long) sourceIndex * 4, (long) length * 4));
    }

    /** Reads {@code destination.length} elements from the start of this buffer. */
    public void copyTo(float[] destination) {
        copyTo(0, destination, 0, destination.length);
    }

    /** Reads {@code length} elements at {@code byteOffset} of this buffer into {@code destination} from {@code destinationIndex}. */
    public void copyTo(long byteOffset, float[] destination, int destinationIndex, int length) {
        Objects.checkFromIndexSize(destinationIndex, length, destination.length);
        read(byteOffset, MemorySegment.ofArray(destination).asSlice((long) destinationIndex * 4, (long) length * 4));
    }

    /** Writes all of {@code source} at the start of this buffer. */
    public void copyFrom(double[] source) {
        copyFrom(0, source, 0, source.length);
    }

    /** Writes {@code length} elements of {@code source} from {@code sourceIndex} at {@code byteOffset} of this buffer. */
    public void copyFrom(long byteOffset, double[] source, int sourceIndex, int length) {
        Objects.checkFromIndexSize(sourceIndex, length, source.length);
        write(byteOffset, MemorySegment.ofArray(source).asSlice((long) sourceIndex * 8, (long) length * 8));
    }

    /** Reads {@code destination.length} elements from the start of this buffer. */
    public void copyTo(double[] destination) {
        copyTo(0, destination, 0, destination.length);
    }

    /** Reads {@code length} elements at {@code byteOffset} of this buffer into {@code destination} from {@code destinationIndex}. */
    public void copyTo(long byteOffset, double[] destination, int destinationIndex, int length) {
        Objects.checkFromIndexSize(destinationIndex, length, destination.length);
        read(byteOffset, MemorySegment.ofArray(destination).asSlice((long) destinationIndex * 8, (long) length * 8));
    }

    /** Writes all of {@code source} at {@code byteOffset}. {@code source} may be a heap or a native segment. */
    public void copyFrom(long byteOffset, MemorySegment source) {
        write(byteOffset, source);
    }

    /** Fills {@code destination} from {@code byteOffset} of this buffer. */
    public void copyTo(long byteOffset, MemorySegment destination) {
        read(byteOffset, destination);
    }

    /**
     * Writes {@code source} at {@code byteOffset} without waiting; {@code source} must stay valid and unchanged
     * until the future completes. Closing the buffer before then is safe: its memory is reused only afterwards.
     */
    public synchronized CompletableFuture<Void> copyFromAsync(long byteOffset, MemorySegment source) {
        try (var access = manager.access()) {
            checkRange(byteOffset, source.byteSize());
            Block device = openBlock();
            if (isHostAccessible() || state.hostIsNewer()) {
                write(byteOffset, source);
                return DONE;
            }
            awaitInFlight();
            CompletableFuture<Void> done = manager.computeBackend().copyToDeviceAsync(source, device.segment(), device.offset() + byteOffset, source.byteSize());
            manager.countHostToDevice(location, source.byteSize());
            state = mirror == null ? BufferState.DEVICE_ONLY : BufferState.DEVICE_DIRTY;
            inFlight = done;
            return done;
        }
    }

    /** Reads into {@code destination} from {@code byteOffset} without waiting. */
    public synchronized CompletableFuture<Void> copyToAsync(long byteOffset, MemorySegment destination) {
        try (var access = manager.access()) {
            checkRange(byteOffset, destination.byteSize());
            Block device = openBlock();
            if (isHostAccessible() || !readsFromDevice()) {
                read(byteOffset, destination);
                return DONE;
            }
            awaitInFlight();
            CompletableFuture<Void> done = manager.computeBackend().copyToHostAsync(device.segment(), device.offset() + byteOffset, destination, destination.byteSize());
            manager.countDeviceToHost(location, destination.byteSize());
            inFlight = done;
            return done;
        }
    }

    /**
     * Copies {@code bytes} from {@code source} at {@code sourceOffset} to this buffer at {@code targetOffset};
     * device to device where both copies live on the device. Both buffers must come from the same manager.
     */
    public void copyFrom(UnifiedBuffer source, long sourceOffset, long targetOffset, long bytes) {
        try (var access = manager.access()) {
            if (source.manager != manager) {
                throw new IllegalArgumentException("the source buffer belongs to another UnifiedMemoryManager; copy through host memory instead");
            }
            source.checkRange(sourceOffset, bytes);
            checkRange(targetOffset, bytes);
            if (source.isHostAccessible()) {
                write(targetOffset, source.hostSlice(sourceOffset, bytes));
                return;
            }
            if (isHostAccessible()) {
                source.read(sourceOffset, hostSlice(targetOffset, bytes));
                return;
            }
            Region from = source.deviceRegion(false);
            synchronized (this) {
                Block target = openBlock();
                if (state.hostIsNewer()) {
                    syncToDevice();
                }
                awaitInFlight();
                manager.computeBackend().copyWithinDevice(from.allocation(), from.offset() + sourceOffset, target.segment(), target.offset() + targetOffset, bytes);
                manager.countDeviceToDevice(location, bytes);
                state = mirror == null ? BufferState.DEVICE_ONLY : BufferState.DEVICE_DIRTY;
            }
        }
    }

    /** A writable view of the host copy (the memory itself where it is host-accessible). Marks the host copy newer. */
    public synchronized MemorySegment hostView() {
        try (var access = manager.access()) {
            MemorySegment view = currentHostCopy();
            if (!isHostAccessible()) {
                state = state == BufferState.UNINITIALIZED ? BufferState.HOST_ONLY
                        : state == BufferState.HOST_ONLY ? BufferState.HOST_ONLY : BufferState.HOST_DIRTY;
            } else {
                state = BufferState.SYNCHRONIZED;
            }
            return view;
        }
    }

    /** A read-only view of the host copy, brought up to date first; the state does not become host-dirty. */
    public synchronized MemorySegment readOnlyHostView() {
        try (var access = manager.access()) {
            MemorySegment view = currentHostCopy();
            if (!isHostAccessible() && state.deviceIsNewer()) {
                state = BufferState.SYNCHRONIZED;
            }
            return view.asReadOnly();
        }
    }

    /** Brings the device copy up to date with a newer host copy; nothing to do on host-accessible memory. */
    public synchronized void syncToDevice() {
        try (var access = manager.access()) {
            Block device = openBlock();
            if (isHostAccessible() || !state.hostIsNewer()) {
                return;
            }
            awaitInFlight();
            Block host = Objects.requireNonNull(mirror);
            manager.computeBackend().copyToDevice(hostSegment(host).asSlice(0, byteSize), device.segment(), device.offset(), byteSize);
            manager.countHostToDevice(location, byteSize);
            state = BufferState.SYNCHRONIZED;
        }
    }

    /** Brings the host copy up to date with a newer device copy; nothing to do on host-accessible memory. */
    public synchronized void syncToHost() {
        try (var access = manager.access()) {
            openBlock();
            if (isHostAccessible() || !state.deviceIsNewer()) {
                return;
            }
            currentHostCopy();
            state = BufferState.SYNCHRONIZED;
        }
    }

    /** Gives the memory back to the pool (once device work queued on it has finished). Harmless when already closed. */
    @Override
    public void close() {
        Block device;
        Block host;
        CompletableFuture<?> pending;
        synchronized (this) {
            if (block == null) {
                return;
            }
            device = block;
            host = mirror;
            pending = inFlight;
            block = null;
            mirror = null;
            inFlight = DONE;
        }
        if (leakTracker != null) {
            leakTracker.closed();
        }
        manager.release(location, device, host, pending);
    }

    @Override
    public String toString() {
        return "UnifiedBuffer[" + location + ", " + byteSize + " bytes, " + dataType + ", " + (isClosed() ? "closed" : state()) + "]";
    }

    // ---- used by the op set -------------------------------------------------------------------------------

    /** The device copy for a kernel, synced first if the host copy is newer; for a write, the device copy becomes newer. */
    synchronized Region deviceRegion(boolean forWrite) {
        try (var access = manager.access()) {
            Block device = openBlock();
            if (state.hostIsNewer()) {
                syncToDevice();
            }
            // work queued by another thread may sit on another stream: a kernel must not overtake it
            awaitInFlight();
            if (forWrite) {
                state = isHostAccessible() || mirror == null
                        ? (isHostAccessible() ? BufferState.SYNCHRONIZED : BufferState.DEVICE_ONLY)
                        : BufferState.DEVICE_DIRTY;
            }
            return new Region(device.segment(), device.offset(), elementCount(), dataType);
        }
    }

    /** Remembers device work queued on this buffer; close() keeps the memory from reuse until it completes. */
    synchronized void recordInFlight(CompletableFuture<?> work) {
        inFlight = inFlight.isDone() ? work : CompletableFuture.allOf(inFlight, work);
    }

    boolean belongsTo(PooledMemoryManager owner) {
        return manager == owner;
    }

    // ---- internals ------------------------------------------------------------------------------------------

    private synchronized void write(long byteOffset, MemorySegment source) {
        try (var access = manager.access()) {
            long length = source.byteSize();
            checkRange(byteOffset, length);
            Block device = openBlock();
            awaitInFlight();
            if (isHostAccessible()) {
                MemorySegment.copy(source, 0, hostSegment(device), byteOffset, length);
                state = BufferState.SYNCHRONIZED;
            } else if (state.hostIsNewer()) {
                MemorySegment.copy(source, 0, hostSegment(Objects.requireNonNull(mirror)), byteOffset, length);
            } else {
                manager.computeBackend().copyToDevice(source, device.segment(), device.offset() + byteOffset, length);
                state = mirror == null ? BufferState.DEVICE_ONLY : BufferState.DEVICE_DIRTY;
            }
            manager.countHostToDevice(location, length);
        }
    }

    private synchronized void read(long byteOffset, MemorySegment destination) {
        try (var access = manager.access()) {
            long length = destination.byteSize();
            checkRange(byteOffset, length);
            Block device = openBlock();
            awaitInFlight();
            if (isHostAccessible()) {
                MemorySegment.copy(hostSegment(device), byteOffset, destination, 0, length);
            } else if (!readsFromDevice()) {
                MemorySegment.copy(hostSegment(Objects.requireNonNull(mirror)), byteOffset, destination, 0, length);
            } else {
                manager.computeBackend().copyToHost(device.segment(), device.offset() + byteOffset, destination, length);
            }
            manager.countDeviceToHost(location, length);
        }
    }

    /** Where a read of a discrete buffer comes from: the mirror when it is at least as new as the device. */
    private boolean readsFromDevice() {
        return mirror == null || !(state.hostIsNewer() || state == BufferState.SYNCHRONIZED);
    }

    /** The host copy as it should be read now: the memory itself, or the mirror after pulling newer device data. */
    private MemorySegment currentHostCopy() {
        Block device = openBlock();
        awaitInFlight();
        if (isHostAccessible()) {
            return manager.scoped(hostSegment(device));
        }
        if (mirror == null) {
            mirror = manager.allocateMirror(byteSize);
            if (leakTracker != null) {
                leakTracker.mirror(mirror);
            }
        }
        MemorySegment host = manager.scoped(hostSegment(mirror));
        if (state.deviceIsNewer()) {
            manager.computeBackend().copyToHost(device.segment(), device.offset(), host, byteSize);
            manager.countDeviceToHost(location, byteSize);
        }
        return host;
    }

    private synchronized MemorySegment hostSlice(long offset, long length) {
        return hostSegment(openBlock()).asSlice(offset, length);
    }

    private static MemorySegment hostSegment(Block b) {
        NativeAllocation segment = b.segment();
        MemorySegment host = segment.hostSegment();
        if (host == null) {
            throw new IllegalStateException("memory at " + segment.location() + " is not host-accessible on this backend");
        }
        return host.asSlice(b.offset(), b.requestedSize());
    }

    private void awaitInFlight() {
        if (!inFlight.isDone()) {
            inFlight.join();
        }
        inFlight = DONE;
    }

    private Block openBlock() {
        Block b = block;
        if (b == null) {
            throw new IllegalStateException("this buffer (" + location + ", " + byteSize + " bytes) is closed"
                    + (manager.isClosed() ? " because its UnifiedMemoryManager was closed" : ""));
        }
        return b;
    }

    private void checkRange(long byteOffset, long length) {
        if (byteOffset < 0 || length < 0 || byteOffset > byteSize - length) {
            throw new IndexOutOfBoundsException("range [" + byteOffset + ", " + byteOffset + " + " + length
                    + ") is outside this buffer of " + byteSize + " bytes");
        }
    }
}
