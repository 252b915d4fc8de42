package dev.compute.memory;

import dev.compute.memory.resource.Block;
import dev.compute.memory.resource.DeviceWork;
import dev.compute.memory.spi.DeviceHandle;
import dev.compute.memory.spi.FileMappings;
import dev.compute.memory.spi.NativeAllocation;
import dev.compute.memory.spi.Region;
import java.lang.foreign.MemorySegment;
import java.lang.ref.Reference;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.BiConsumer;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;

/**
 * A block of compute memory from a {@link UnifiedMemoryManager}. Close it when done (try-with-resources);
 * closing twice is harmless and any other use after close fails with an {@link IllegalStateException} that
 * names the buffer.
 *
 * <p><b>The lifetime rule.</b> Every use of the memory (a copy, an op, a host view, an access for one's own
 * kernel, a slice) holds the buffer open while it lasts. {@link #close()} makes the buffer unusable at once, but
 * its memory goes back to the pool only when the last of them has ended and device work queued on it has
 * finished: nothing reachable through this API ever reads or writes memory that was freed or handed to another
 * buffer.
 *
 * <p><b>Reaching the bytes.</b>
 * <ul>
 *   <li>{@link #hostView()} and {@link #readOnlyHostView()}: a segment of the host copy, usable by the thread
 *       that took it until the buffer closes. Cheap (no handshake with other threads); another thread that
 *       touches it gets a {@link WrongThreadException}. Closing the buffer on that thread ends the view at once;
 *       closed on another thread (or found leaked), the view ends when its thread next calls into the manager, and
 *       the memory waits for it.</li>
 *   <li>{@link #hostAccess(AccessMode)}: the same, for the span of a try-with-resources block.
 *       {@link #sharedHostAccess(AccessMode)}: a segment any thread may use, at the price of a handshake with every
 *       thread when it ends (tens of microseconds).</li>
 *   <li>{@link #deviceAccess(AccessMode)}: the device copy for one's own native code: the backend's allocation
 *       and offset, and its native handle ({@link BufferAccess#handle(Class)}: a CUDA pointer and stream, an
 *       OpenCL buffer and queue).</li>
 *   <li>{@link #slice(long, long)}: a range of this buffer that is a buffer of its own for copies, ops, views and
 *       accesses, valid while this buffer is open.</li>
 * </ul>
 *
 * <p><b>Where the data is.</b> On memory the host can address (every location of the CPU backend; HOST, PINNED
 * and UNIFIED on accelerators) there is one copy: syncs do nothing and host views are the memory itself. On
 * accelerator memory the device copy is the buffer, and a host mirror is made on first need (from the pinned
 * pool when pinning is on). {@link #state()} says which copy is newer; syncs are lazy (ops, views and accesses
 * sync what they need) and explicit ones exist. Copies from and to arrays go to whichever copy is newer, so they
 * never force a sync of the whole buffer. A writable view marks the host copy newer when it is taken; writes made
 * through it after a later sync are not seen: take a fresh view after device work, or use an access.
 *
 * <p>Thread-safe: one buffer's transitions are serialised on the buffer (a slice's on the buffer it slices).
 * Work of several threads on one buffer is not ordered by the buffer: order it yourself.
 */
public final class UnifiedBuffer implements AutoCloseable {

    private static final CompletableFuture<Void> DONE = CompletableFuture.completedFuture(null);
    /** In {@link #lifecycle}: close() was called. */
    private static final int CLOSED = 1;
    /** In {@link #lifecycle}: one op or copy under way holds the memory (the count is kept above the flag). */
    private static final int HOLD = 2;

    /** A device access as it opens: the memory, and the scope that holds it. */
    private record Opened(Block device, MemoryScope scope) {}

    /**
     * What a slice is a range of: the buffer that owns the memory, where in it the slice starts, the slice it was
     * cut from (if any), and the tokens that name its views: its own first, then its ancestors' (tokens, not the
     * slices: open views must not keep a slice, nor its buffer, from being collected).
     */
    private record SliceOf(UnifiedBuffer root, long byteOffset, @Nullable UnifiedBuffer parent, Object[] lineage) {}

    private final PooledMemoryManager manager;
    private final MemoryLocation location;
    private final DataType dataType;
    private final long byteSize;
    private final @Nullable SliceOf slice;
    /** The file range this buffer's memory maps, for a buffer from {@code mapFile} and its slices; else null. */
    private final @Nullable FileRange mappedFrom;
    // The fields below belong to a buffer that owns memory, and are guarded by its monitor; a slice uses its root's.
    private @Nullable Block block;
    private @Nullable Block mirror;
    private BufferState state = BufferState.UNINITIALIZED;
    private CompletableFuture<?> inFlight = DONE;
    /** CLOSED, plus HOLD for each op or copy under way; for a slice, only whether the slice itself was closed. */
    private int lifecycle;
    /** Open views and accesses; made on the first. */
    private @Nullable BufferScopes scopes;
    private final LeakDetector.@Nullable Tracker leakTracker;

    UnifiedBuffer(PooledMemoryManager manager, MemoryLocation location, DataType dataType, long byteSize, Block block,
                  LeakDetector.@Nullable Tracker leakTracker) {
        this(manager, location, dataType, byteSize, block, leakTracker, null);
    }

    /** A buffer over a mapped file: HOST memory whose one copy, the file's bytes, holds data from the start. */
    UnifiedBuffer(PooledMemoryManager manager, DataType dataType, MappedFile mapping, LeakDetector.@Nullable Tracker leakTracker) {
        this(manager, MemoryLocation.HOST, dataType, mapping.size(), mapping, leakTracker, mapping.range());
        this.state = BufferState.SYNCHRONIZED;
    }

    private UnifiedBuffer(PooledMemoryManager manager, MemoryLocation location, DataType dataType, long byteSize, Block block,
                          LeakDetector.@Nullable Tracker leakTracker, @Nullable FileRange mappedFrom) {
        this.manager = manager;
        this.location = location;
        this.dataType = dataType;
        this.byteSize = byteSize;
        this.slice = null;
        this.mappedFrom = mappedFrom;
        this.block = block;
        this.leakTracker = leakTracker;
    }

    private UnifiedBuffer(UnifiedBuffer cutFrom, long byteOffset, long byteSize) {
        this.manager = cutFrom.manager;
        this.location = cutFrom.location;
        this.dataType = cutFrom.dataType;
        this.byteSize = byteSize;
        Object[] ancestors = cutFrom.slice == null ? new Object[0] : cutFrom.slice.lineage();
        Object[] lineage = new Object[ancestors.length + 1];
        lineage[0] = new Object();
        System.arraycopy(ancestors, 0, lineage, 1, ancestors.length);
        this.slice = new SliceOf(cutFrom.root(), byteOffset, cutFrom.slice == null ? null : cutFrom, lineage);
        this.mappedFrom = cutFrom.mappedFrom;
        this.leakTracker = null;
    }

    public MemoryLocation location() {
        return location;
    }

    /** The block of a buffer just allocated (not a slice, not yet closed), for the manager's books. */
    Block ownBlock() {
        synchronized (this) {
            if (block == null) {
                throw new IllegalStateException(this + " has no block of its own");
            }
            return block;
        }
    }

    /** The element type it was allocated by; {@link DataType#INT8} for buffers allocated by bytes. */
    public DataType dataType() {
        return dataType;
    }

    /** The bytes asked for (the pool may have set aside a little more); for a slice, the slice's bytes. */
    public long byteSize() {
        return byteSize;
    }

    public long elementCount() {
        return byteSize / dataType.byteSize();
    }

    /** Where a slice starts in the buffer that owns its memory, in bytes; 0 for a buffer that is no slice. */
    public long byteOffset() {
        return slice == null ? 0 : slice.byteOffset();
    }

    /** True for a range of another buffer made by {@link #slice}. */
    public boolean isSlice() {
        return slice != null;
    }

    /** Which copy is newer; a slice answers for the whole buffer it is a range of. */
    public BufferState state() {
        UnifiedBuffer root = root();
        synchronized (root) {
            return root.state;
        }
    }

    /** True once this buffer (or, for a slice, the slice or its buffer) was closed, or its manager was. */
    public boolean isClosed() {
        UnifiedBuffer root = root();
        synchronized (root) {
            return closedHere() || manager.isClosed();
        }
    }

    /** True when host and device share this buffer's memory: one copy, syncs cost nothing. */
    public boolean isHostAccessible() {
        return manager.hostAccessible(location);
    }

    /** The manager that made this buffer. */
    public UnifiedMemoryManager manager() {
        return manager;
    }

    /** The file whose bytes this buffer is ({@link UnifiedMemoryManager#mapFile}, and its slices); null for pooled memory. */
    public @Nullable Path mappedFile() {
        return mappedFrom == null ? null : mappedFrom.file();
    }

    /**
     * True for a buffer over a file mapped {@link FileMapMode#READ_ONLY} (and its slices): every way to write it (a
     * copy into it, an op that writes it, {@link #hostView()}, a writing access) fails with an
     * {@link UnsupportedOperationException} before it touches the memory.
     */
    public boolean isReadOnly() {
        return mappedFrom != null && mappedFrom.readOnly();
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
    public CompletableFuture<Void> copyFromAsync(long byteOffset, MemorySegment source) {
        requireWritable("copyFromAsync", "");
        int call = manager.enter(this);
        try {
            checkRange(byteOffset, source.byteSize());
            CompletableFuture<Void> queued = whenIdle(root -> {
                Block device = openBlock();
                if (isHostAccessible() || root.state.hostIsNewer()) {
                    writeLocked(root, device, byteOffset, source);
                    return DONE;
                }
                CompletableFuture<Void> done = manager.computeBackend().copyToDeviceAsync(source, device.segment(),
                        device.offset() + byteOffset() + byteOffset, source.byteSize());
                manager.countHostToDevice(location, source.byteSize());
                root.state = root.deviceWritten();
                root.recordInFlight(done);
                return done;
            });
            surfaceFaults(source);
            return queued;
        } catch (RuntimeException | InternalError failure) {
            failIfTruncated(failure, source, this);
            throw failure;
        } finally {
            manager.exit(call);
        }
    }

    /** Reads into {@code destination} from {@code byteOffset} without waiting. */
    public CompletableFuture<Void> copyToAsync(long byteOffset, MemorySegment destination) {
        int call = manager.enter(this);
        try {
            checkRange(byteOffset, destination.byteSize());
            CompletableFuture<Void> queued = whenIdle(root -> {
                Block device = openBlock();
                if (isHostAccessible() || !root.readsFromDevice()) {
                    readLocked(root, device, byteOffset, destination);
                    return DONE;
                }
                CompletableFuture<Void> done = manager.computeBackend().copyToHostAsync(device.segment(),
                        device.offset() + byteOffset() + byteOffset, destination, destination.byteSize());
                manager.countDeviceToHost(location, destination.byteSize());
                root.recordInFlight(done);
                return done;
            });
            surfaceFaults(destination);
            return queued;
        } catch (RuntimeException | InternalError failure) {
            failIfTruncated(failure, destination, this);
            throw failure;
        } finally {
            manager.exit(call);
        }
    }

    /**
     * Copies all of {@code source} to the start of this buffer, as {@link #copyFrom(UnifiedBuffer, long, long, long)}.
     * A mapped file's buffer copied to DEVICE memory streams to the device in chunks of the staging buffer
     * ({@code compute.memory.pinning.staging-buffer-size}) where the backend stages copies from host memory, without
     * a second copy of the whole file in host memory.
     */
    public void copyFrom(UnifiedBuffer source) {
        copyFrom(source, 0, 0, source.byteSize());
    }

    /**
     * Copies {@code bytes} from {@code source} at {@code sourceOffset} to this buffer at {@code targetOffset};
     * device to device where both copies live on the device. Both buffers must come from the same manager. Both
     * stay held until the copy is done, whoever closes them meanwhile.
     */
    public void copyFrom(UnifiedBuffer source, long sourceOffset, long targetOffset, long bytes) {
        if (source.manager != manager) {
            throw new IllegalArgumentException("the source buffer belongs to another UnifiedMemoryManager; copy through host memory instead");
        }
        requireWritable("copyFrom", "");
        source.checkRange(sourceOffset, bytes);
        checkRange(targetOffset, bytes);
        int call = manager.enter(this);
        try {
            if (source.isHostAccessible()) {
                MemorySegment from = source.holdHostBytes();
                try {
                    write(targetOffset, from.asSlice(sourceOffset, bytes));
                } finally {
                    source.releaseHold(null, DONE);
                }
            } else if (isHostAccessible()) {
                MemorySegment to = holdHostBytes();
                try {
                    source.read(sourceOffset, to.asSlice(targetOffset, bytes));
                } finally {
                    releaseHold(AccessMode.WRITE, DONE);
                }
            } else {
                Region from = source.holdDeviceRegion(AccessMode.READ);
                try {
                    Region to = holdDeviceRegion(AccessMode.WRITE);
                    try {
                        manager.computeBackend().copyWithinDevice(from.allocation(), from.offset() + sourceOffset,
                                to.allocation(), to.offset() + targetOffset, bytes);
                        manager.countDeviceToDevice(location, bytes);
                    } finally {
                        releaseHold(AccessMode.WRITE, DONE);
                    }
                } finally {
                    source.releaseHold(null, DONE);
                }
            }
            if (source.mappedFrom != null || mappedFrom != null) {
                FileMappings.surfaceFaults();
            }
        } catch (RuntimeException | InternalError failure) {
            failIfTruncated(failure, source, this);
            throw failure;
        } finally {
            manager.exit(call);
        }
    }

    /**
     * A writable view of the host copy (the memory itself where it is host-accessible), usable by the calling
     * thread until this buffer closes; marks the host copy newer. Taking several views on one thread costs one
     * confined arena in all. A file mapped read-only has none: this throws {@link UnsupportedOperationException}
     * there rather than hand out a segment whose first write would fail; take {@link #readOnlyHostView()}.
     */
    public MemorySegment hostView() {
        requireWritable("hostView()", "; take readOnlyHostView() to read it");
        return view(true);
    }

    /** A read-only view of the host copy, brought up to date first; the state does not become host-dirty. */
    public MemorySegment readOnlyHostView() {
        return view(false);
    }

    private MemorySegment view(boolean writable) {
        int call = manager.enter(this);
        try {
            return whenIdle(root -> {
                MemorySegment host = root.currentHostCopy(openBlock());
                if (writable) {
                    root.state = root.hostWritten();
                }
                Object[] lineage = slice == null ? null : slice.lineage();
                MemoryScope scope = root.scopes().viewOf(Thread.currentThread(), lineage);
                if (scope == null) {
                    scope = manager.scopes().open(MemoryScope.Kind.VIEW, lineage, false, root.scopes());
                }
                MemorySegment view = scope.bind(host.asSlice(byteOffset(), byteSize));
                return writable ? view : view.asReadOnly();
            });
        } finally {
            manager.exit(call);
        }
    }

    /**
     * An access to the host copy, brought up to date first, for the calling thread and until it is closed (use
     * try-with-resources): {@link BufferAccess#segment()} is the bytes. Ending a writing access marks the host copy
     * newer. The buffer's memory is not given back while the access is open, even if the buffer is closed.
     */
    public BufferAccess hostAccess(AccessMode mode) {
        return openHostAccess(mode, false);
    }

    /**
     * As {@link #hostAccess}, but the segment may be used by any thread. Ending it costs a handshake with every
     * thread of the JVM (tens of microseconds); it fails while a native call still holds the segment.
     */
    public BufferAccess sharedHostAccess(AccessMode mode) {
        return openHostAccess(mode, true);
    }

    private BufferAccess openHostAccess(AccessMode mode, boolean shared) {
        Objects.requireNonNull(mode, "mode");
        if (mode.writes()) {
            requireWritable("a " + mode + " host access", "; open a READ access to read it");
        }
        int call = manager.enter(this);
        try {
            return whenIdle(root -> {
                MemorySegment host = root.currentHostCopy(openBlock());
                if (mode.writes()) {
                    root.state = root.hostWritten();
                }
                MemoryScope scope = manager.scopes().open(MemoryScope.Kind.ACCESS, null, shared, root.scopes());
                return new BufferAccess(this, mode, false, scope, host.asSlice(byteOffset(), byteSize), 0, DeviceHandle.NONE);
            });
        } finally {
            manager.exit(call);
        }
    }

    /**
     * An access to the device copy for one's own native code (a kernel, a library), on the calling thread until it
     * is closed: {@link BufferAccess#handle(Class)} gives the backend's native handle for these bytes (a CUDA
     * pointer and stream, an OpenCL buffer and queue). A newer host copy is synced first and
     * device work queued by other threads on this buffer is waited for. Ending the access records the work queued
     * on the handle as in flight (close and host reads wait for it) and, for a writing access, marks the device
     * copy newer. On host-accessible memory {@link BufferAccess#segment()} works too.
     */
    public BufferAccess deviceAccess(AccessMode mode) {
        Objects.requireNonNull(mode, "mode");
        if (mode.writes()) {
            requireWritable("a " + mode + " device access", "; open a READ access to read it");
        }
        int call = manager.enter(this);
        try {
            UnifiedBuffer root = root();
            Opened opened = whenIdle(locked -> {
                Block open = openBlock();
                if (locked.state.hostIsNewer()) {
                    locked.syncToDeviceLocked(open);
                }
                return new Opened(open, manager.scopes().open(MemoryScope.Kind.ACCESS, null, false, locked.scopes()));
            });
            Block device = opened.device();
            MemoryScope scope = opened.scope();
            long offset = device.offset() + byteOffset();
            DeviceHandle handle;
            try {
                handle = manager.computeBackend().openDeviceHandle(device.segment(), offset, byteSize, mode);
            } catch (RuntimeException e) {
                scope.end();
                throw e;
            }
            if (mode.writes()) {
                synchronized (root) {
                    root.state = root.deviceWritten();
                }
            }
            MemorySegment host = device.segment().hostSegment();
            return new BufferAccess(this, mode, true, scope, host == null ? null : host.asSlice(offset, byteSize), offset, handle);
        } finally {
            manager.exit(call);
        }
    }

    /**
     * Called by an access as it ends, with the device work in flight on its bytes: a writing access makes the copy
     * it wrote (the device's for a device access, the host's for a host access) the newer one.
     */
    void accessEnded(boolean device, AccessMode mode, CompletableFuture<?> work) {
        UnifiedBuffer root = root();
        synchronized (root) {
            root.recordInFlight(work);
            if (mode.writes()) {
                root.state = device ? root.deviceWritten() : root.hostWritten();
            }
        }
    }

    /**
     * Called by a device access whose backend could not say what work it queued: waits, at most the close timeout,
     * for the device to finish everything, so the memory is not reused under it.
     */
    void awaitDeviceIdle() {
        manager.awaitDeviceIdle();
    }

    /** Counts an ending access in as a call under way; give the result to {@link #exitFromEnd}. */
    int enterToEnd() {
        return manager.enterToEnd();
    }

    void exitFromEnd(int call) {
        manager.exit(call);
    }

    /**
     * {@code count} elements (bytes for a buffer allocated by bytes) from element {@code offset}: a buffer of its
     * own over the same memory, for copies, ops, views, accesses and further slices, sharing this buffer's state.
     * It is valid while this buffer is open; closing the slice ends only the slice.
     */
    public UnifiedBuffer slice(long offset, long count) {
        long elements = elementCount();
        if (offset < 0 || count <= 0 || offset > elements - count) {
            throw new IndexOutOfBoundsException("slice [" + offset + ", " + offset + " + " + count + ") is outside "
                    + this + " of " + elements + " elements" + (count <= 0 ? " (a slice needs at least one element)" : ""));
        }
        UnifiedBuffer root = root();
        synchronized (root) {
            openBlock();
        }
        long unit = dataType.byteSize();
        return new UnifiedBuffer(this, byteOffset() + offset * unit, count * unit);
    }

    /** Brings the device copy up to date with a newer host copy; nothing to do on host-accessible memory. */
    public void syncToDevice() {
        int call = manager.enter(this);
        try {
            whenIdle(root -> {
                Block device = openBlock();
                if (!isHostAccessible() && root.state.hostIsNewer()) {
                    root.syncToDeviceLocked(device);
                }
                return null;
            });
        } finally {
            manager.exit(call);
        }
    }

    /** Brings the host copy up to date with a newer device copy; nothing to do on host-accessible memory. */
    public void syncToHost() {
        int call = manager.enter(this);
        try {
            whenIdle(root -> {
                Block device = openBlock();
                if (!isHostAccessible() && root.state.deviceIsNewer()) {
                    root.currentHostCopy(device);
                }
                return null;
            });
        } finally {
            manager.exit(call);
        }
    }

    /** Says the device copy was written by other means (a library that took the pointer): it is the newer one now. */
    public void markDeviceDirty() {
        UnifiedBuffer root = root();
        synchronized (root) {
            openBlock();
            if (!isHostAccessible()) {
                root.state = root.deviceWritten();
            }
        }
    }

    /**
     * Says the host copy was written by other means: it is the newer one now. There must be a host copy: a
     * discrete buffer has one once a view or a host access was taken.
     */
    public void markHostDirty() {
        UnifiedBuffer root = root();
        synchronized (root) {
            openBlock();
            if (!isHostAccessible()) {
                if (root.mirror == null) {
                    throw new IllegalStateException(this + " has no host copy to be newer: it is made by hostView() or hostAccess()");
                }
                root.state = root.hostWritten();
            }
        }
    }

    /**
     * Makes the buffer unusable at once; its memory goes back to the pool when the last view, access, op or copy
     * that holds it has ended and device work queued on it has finished. Harmless when already closed. Closing a
     * slice ends only the slice.
     */
    @Override
    public void close() {
        manager.scopes().endHandedOver();
        if (slice != null) {
            BufferScopes open;
            synchronized (slice.root()) {
                if ((lifecycle & CLOSED) != 0) {
                    return;
                }
                lifecycle |= CLOSED;
                open = slice.root().scopes;
            }
            if (open != null) {
                open.endViewsOf(slice.lineage()[0]);
            }
            return;
        }
        BufferScopes open;
        Block device = null;
        Block host = null;
        CompletableFuture<?> pending = DONE;
        synchronized (this) {
            if ((lifecycle & CLOSED) != 0) {
                return;
            }
            lifecycle |= CLOSED;
            open = scopes;
            if (open == null && lifecycle == CLOSED) { // the common case, released under the one lock
                device = block;
                host = mirror;
                pending = inFlight;
                block = null;
                mirror = null;
                inFlight = DONE;
            }
        }
        if (leakTracker != null) {
            leakTracker.closed();
            // reachable, and the tracker with it, until the tracker knows: else the cleaner could release the memory again
            Reference.reachabilityFence(this);
        }
        if (device != null) {
            manager.release(location, device, host, pending);
        } else if (open != null) {
            open.closeViews(this::releaseIfUnused);
        }
    }

    @Override
    public String toString() {
        String where = slice == null ? byteSize + " bytes" : byteSize + " bytes at " + slice.byteOffset() + " of " + slice.root().byteSize;
        return "UnifiedBuffer[" + location + ", " + where + ", " + dataType + ", " + (isClosed() ? "closed" : state())
                + (mappedFrom == null ? "" : ", " + mappedFrom) + "]";
    }

    // ---- used by the op set -------------------------------------------------------------------------------

    /**
     * Holds the memory for a kernel and returns where it is: the device copy, synced first if the host copy is
     * newer, after device work queued by others. Give it back with {@link #releaseHold} and the kernel's future.
     */
    Region holdDeviceRegion(AccessMode mode) {
        if (mode.writes()) {
            requireWritable("an op that writes its argument", "");
        }
        // work queued by another thread may sit on another stream: a kernel must not overtake it
        return whenIdle(root -> {
            Block device = openBlock();
            if (root.state.hostIsNewer()) {
                root.syncToDeviceLocked(device);
            }
            if (mode.writes()) {
                root.state = root.deviceWritten();
            }
            root.lifecycle += HOLD;
            return new Region(device.segment(), device.offset() + byteOffset(), elementCount(), dataType);
        });
    }

    /**
     * Ends a hold: records {@code work} as device work in flight on the memory and, when {@code wrote} is a
     * writing mode, marks the device copy newer; gives the memory back if the buffer was closed meanwhile.
     */
    void releaseHold(@Nullable AccessMode wrote, CompletableFuture<?> work) {
        UnifiedBuffer root = root();
        synchronized (root) {
            root.recordInFlight(work);
            if (wrote != null && wrote.writes()) {
                root.state = root.deviceWritten();
            }
            root.lifecycle -= HOLD;
        }
        root.releaseIfUnused();
    }

    /** What a compaction step did with a buffer. */
    enum Move { MOVED, IN_USE, NO_PLACE }

    /** How compaction moves a buffer's block: true when it found a place and moved it there, copying the data when asked. */
    @FunctionalInterface
    interface BlockMover {
        boolean move(Block block, boolean keepData);
    }

    /**
     * Compaction's step for a buffer that owns pooled memory: moves its block with {@code mover} if nothing holds it
     * (no op or copy under way, no view or access open, not closed). Device work still in flight on it (an access just
     * ended, an async op) is waited for without the monitor, until {@code deadline} ({@link System#nanoTime()}) at most;
     * past it the buffer counts as in use. The move runs under the buffer's monitor, which every use takes to find the
     * block: no use can start on the old place meanwhile, and the next one finds the new place. The data is copied
     * unless no copy of it lives in the block yet.
     */
    Move relocate(BlockMover mover, long deadline) {
        CompletableFuture<?> pending;
        synchronized (this) {
            if (!movable()) {
                return Move.IN_USE;
            }
            pending = inFlight;
            if (pending.isDone()) {
                return moveLocked(mover);
            }
        }
        if (!DeviceWork.awaitAll(List.of(pending), deadline)) {
            return Move.IN_USE;
        }
        synchronized (this) {
            return movable() && inFlight.isDone() ? moveLocked(mover) : Move.IN_USE;
        }
    }

    /** Under the monitor: an open buffer of pooled memory that no op, copy, view or access holds now. */
    private boolean movable() {
        return slice == null && lifecycle == 0 && block != null && (scopes == null || scopes.isEmpty()) && !manager.isClosed();
    }

    private Move moveLocked(BlockMover mover) {
        inFlight = DONE;
        boolean keepData = state != BufferState.UNINITIALIZED && state != BufferState.HOST_ONLY;
        return mover.move(Objects.requireNonNull(block), keepData) ? Move.MOVED : Move.NO_PLACE;
    }

    boolean belongsTo(PooledMemoryManager owner) {
        return manager == owner;
    }

    // ---- internals ------------------------------------------------------------------------------------------

    private UnifiedBuffer root() {
        return slice == null ? this : slice.root();
    }

    /** Under the root's monitor: closed here, or (for a slice) the slice it was cut from or its buffer closed. */
    private boolean closedHere() {
        if ((lifecycle & CLOSED) != 0) {
            return true;
        }
        if (slice == null) {
            return false;
        }
        return slice.parent() != null ? slice.parent().closedHere() : (slice.root().lifecycle & CLOSED) != 0;
    }

    /** The host bytes of host-accessible memory, held until {@link #releaseHold}. */
    private MemorySegment holdHostBytes() {
        return whenIdle(root -> {
            Block device = openBlock();
            root.lifecycle += HOLD;
            return rootBytes(device).asSlice(byteOffset(), byteSize);
        });
    }

    private BufferScopes scopes() {
        BufferScopes open = scopes;
        if (open == null) {
            open = new BufferScopes();
            scopes = open;
            if (leakTracker != null) {
                leakTracker.scopes(open);
            }
        }
        return open;
    }

    /** Gives the memory back once closed and nothing holds it; exactly once. */
    private void releaseIfUnused() {
        Block device;
        Block host;
        CompletableFuture<?> pending;
        synchronized (this) {
            if (lifecycle != CLOSED || block == null || (scopes != null && !scopes.isEmpty())) {
                return;
            }
            device = block;
            host = mirror;
            pending = inFlight;
            block = null;
            mirror = null;
            inFlight = DONE;
        }
        manager.release(location, device, host, pending);
    }

    /** Remembers device work queued on the memory; the buffer stays reachable (and so unreleased by the leak detector) until it completes. */
    private void recordInFlight(CompletableFuture<?> work) {
        if (work.isDone()) {
            return;
        }
        inFlight = inFlight.isDone() ? work : CompletableFuture.allOf(inFlight, work);
        UnifiedBuffer self = this;
        work.whenComplete((result, failure) -> Reference.reachabilityFence(self));
    }

    private void write(long byteOffset, MemorySegment source) {
        requireWritable("a copy into it", "");
        copyWhenIdle(byteOffset, source, (root, device) -> writeLocked(root, device, byteOffset, source));
    }

    private void read(long byteOffset, MemorySegment destination) {
        copyWhenIdle(byteOffset, destination, (root, device) -> readLocked(root, device, byteOffset, destination));
    }

    /** A copy between {@code other} and this buffer at {@code byteOffset}, run under the root's monitor once no device work is in flight. */
    private void copyWhenIdle(long byteOffset, MemorySegment other, BiConsumer<UnifiedBuffer, Block> copy) {
        int call = manager.enter(this);
        try {
            checkRange(byteOffset, other.byteSize());
            whenIdle(root -> {
                copy.accept(root, openBlock());
                return null;
            });
            surfaceFaults(other);
        } catch (RuntimeException | InternalError failure) {
            failIfTruncated(failure, other, this);
            throw failure;
        } finally {
            manager.exit(call);
        }
    }

    /**
     * Refuses a write to a file mapped read-only before anything reaches its memory: a write there is a fault that
     * Java code survives (the FFM API refuses it) but native code (a kernel, a driver's copy) does not.
     */
    private void requireWritable(String write, String instead) {
        if (isReadOnly()) {
            throw new UnsupportedOperationException(write + " would write " + this + ", whose file is mapped read-only"
                    + instead + "; map the file FileMapMode.READ_WRITE to change it");
        }
    }

    /**
     * A fault of a memory access on one of these buffers, as what it was when one maps a file that became shorter
     * than its mapping: a {@link MappedFileTruncatedException}. Returns when that is not the case.
     */
    static void failIfTruncated(Throwable failure, UnifiedBuffer... involved) {
        for (UnifiedBuffer buffer : involved) {
            if (buffer.mappedFrom != null) {
                buffer.mappedFrom.failIfTruncated(failure);
            }
        }
    }

    /** As {@link #failIfTruncated(Throwable, UnifiedBuffer...)}, where the other side is a segment: it may be a view of a mapped file. */
    private static void failIfTruncated(Throwable failure, MemorySegment other, UnifiedBuffer buffer) {
        FileRange.failIfTruncated(failure, other);
        failIfTruncated(failure, buffer);
    }

    /**
     * After a copy or an op on memory a mapped file may back (this buffer's, or {@code other}, a view of one): a fault
     * it met, which the JVM delivers late once the copy is compiled, is thrown here, inside the caller's {@code try}.
     */
    private void surfaceFaults(MemorySegment other) {
        if (mappedFrom != null || FileMappings.isOverMapping(other)) {
            FileMappings.surfaceFaults();
        }
    }

    /** As {@link #surfaceFaults(MemorySegment)}, for an op on buffers: where one of them maps a file. */
    static void surfaceFaults(UnifiedBuffer... involved) {
        for (UnifiedBuffer buffer : involved) {
            if (buffer.mappedFrom != null) {
                FileMappings.surfaceFaults();
                return;
            }
        }
    }

    private void writeLocked(UnifiedBuffer root, Block device, long byteOffset, MemorySegment source) {
        long length = source.byteSize();
        long at = byteOffset() + byteOffset;
        if (isHostAccessible()) {
            MemorySegment.copy(source, 0, rootBytes(device), at, length);
            root.state = BufferState.SYNCHRONIZED;
        } else if (root.state.hostIsNewer()) {
            MemorySegment.copy(source, 0, rootBytes(Objects.requireNonNull(root.mirror)), at, length);
        } else {
            manager.computeBackend().copyToDevice(source, device.segment(), device.offset() + at, length);
            root.state = root.deviceWritten();
        }
        manager.countHostToDevice(location, length);
    }

    private void readLocked(UnifiedBuffer root, Block device, long byteOffset, MemorySegment destination) {
        long length = destination.byteSize();
        long at = byteOffset() + byteOffset;
        if (isHostAccessible()) {
            MemorySegment.copy(rootBytes(device), at, destination, 0, length);
        } else if (!root.readsFromDevice()) {
            MemorySegment.copy(rootBytes(Objects.requireNonNull(root.mirror)), at, destination, 0, length);
        } else {
            manager.computeBackend().copyToHost(device.segment(), device.offset() + at, destination, length);
        }
        manager.countDeviceToHost(location, length);
    }

    /** Where a read of a discrete buffer comes from: the mirror when it is at least as new as the device. Root only. */
    private boolean readsFromDevice() {
        return mirror == null || !(state.hostIsNewer() || state == BufferState.SYNCHRONIZED);
    }

    /** The state after the device copy was written. Root only. */
    private BufferState deviceWritten() {
        return isHostAccessible() ? BufferState.SYNCHRONIZED : mirror == null ? BufferState.DEVICE_ONLY : BufferState.DEVICE_DIRTY;
    }

    /** The state after the host copy was written. Root only. */
    private BufferState hostWritten() {
        if (isHostAccessible()) {
            return BufferState.SYNCHRONIZED;
        }
        return state == BufferState.UNINITIALIZED || state == BufferState.HOST_ONLY ? BufferState.HOST_ONLY : BufferState.HOST_DIRTY;
    }

    /** Copies the newer host mirror to the device. Root only, under its monitor. */
    private void syncToDeviceLocked(Block device) {
        Block host = Objects.requireNonNull(mirror);
        manager.computeBackend().copyToDevice(rootBytes(host), device.segment(), device.offset(), byteSize);
        manager.countHostToDevice(location, byteSize);
        state = BufferState.SYNCHRONIZED;
    }

    /**
     * The root's host copy as it should be read now: the memory itself, or the mirror after pulling newer device
     * data (made on first need). Root only, under its monitor.
     */
    private MemorySegment currentHostCopy(Block device) {
        if (isHostAccessible()) {
            return rootBytes(device);
        }
        if (mirror == null) {
            mirror = manager.allocateMirror(byteSize);
            if (leakTracker != null) {
                leakTracker.mirror(mirror);
            }
        }
        MemorySegment host = rootBytes(mirror);
        if (state.deviceIsNewer()) {
            manager.computeBackend().copyToHost(device.segment(), device.offset(), host, byteSize);
            manager.countDeviceToHost(location, byteSize);
            state = BufferState.SYNCHRONIZED;
        }
        return host;
    }

    /** The whole root's bytes in a host-accessible block. */
    private MemorySegment rootBytes(Block b) {
        NativeAllocation segment = b.segment();
        MemorySegment host = segment.hostSegment();
        if (host == null) {
            throw new IllegalStateException("memory at " + segment.location() + " is not host-accessible on this backend");
        }
        return host.asSlice(b.offset(), root().byteSize);
    }

    /**
     * Runs {@code action} under the root's monitor once no device work is in flight on the memory. The wait happens
     * without the monitor, so that close(), state() or toString() on another thread never wait behind device work
     * (which a thread blocked on them might be the one to complete). A closed buffer fails at once, without waiting.
     */
    private <T> T whenIdle(Function<UnifiedBuffer, T> action) {
        UnifiedBuffer root = root();
        while (true) {
            CompletableFuture<?> pending;
            synchronized (root) {
                openBlock();
                pending = root.inFlight;
                if (pending.isDone()) {
                    root.inFlight = DONE;
                    return action.apply(root);
                }
            }
            awaitBounded(pending);
        }
    }

    /** Waits for device work at most the device wait timeout, without the monitor; failed work is over too. */
    private void awaitBounded(CompletableFuture<?> work) {
        Duration limit = manager.deviceWaitTimeout();
        try {
            work.get(limit.toNanos(), TimeUnit.NANOSECONDS);
        } catch (ExecutionException | CancellationException failedWorkIsOverToo) {
            // the memory is free of it either way
        } catch (TimeoutException e) {
            throw new DeviceTimeoutException("device work queued on " + this + " did not finish within " + limit.toMillis()
                    + " ms (compute.memory.device-wait-timeout): a kernel that runs longer, or a device or a future recorded"
                    + " on the buffer that never completes; nothing was changed, and the buffer's memory stays held until"
                    + " the work is over", limit);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new DeviceTimeoutException("interrupted while waiting for device work queued on " + this, limit);
        }
    }

    /** The root's block, if this buffer may be used; under the root's monitor. */
    private Block openBlock() {
        UnifiedBuffer root = root();
        if (closedHere() || root.block == null) {
            throw new IllegalStateException(describeClosed());
        }
        if (manager.isClosed()) {
            throw new IllegalStateException(closedByManager());
        }
        return root.block;
    }

    String closedByManager() {
        return describeClosed() + " because its UnifiedMemoryManager was closed";
    }

    private String describeClosed() {
        String what = slice == null ? byteSize + " bytes" : byteSize + " bytes at " + slice.byteOffset() + " of " + slice.root().byteSize;
        String why = "";
        if (slice != null && (lifecycle & CLOSED) == 0) {
            why = (slice.root().lifecycle & CLOSED) != 0 ? " (the buffer it is a slice of was closed)" : " (the slice it was cut from was closed)";
        }
        return "UnifiedBuffer[" + location + ", " + what + ", " + dataType + (mappedFrom == null ? "" : ", " + mappedFrom) + "] is closed" + why;
    }

    private void checkRange(long byteOffset, long length) {
        if (byteOffset < 0 || length < 0 || byteOffset > byteSize - length) {
            throw new IndexOutOfBoundsException("range [" + byteOffset + ", " + byteOffset + " + " + length
                    + ") is outside this buffer of " + byteSize + " bytes");
        }
    }
}
