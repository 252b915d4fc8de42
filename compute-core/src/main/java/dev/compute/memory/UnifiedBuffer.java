package dev.compute.memory;

import dev.compute.memory.lifetime.BufferCopies;
import dev.compute.memory.lifetime.BufferCore;
import dev.compute.memory.lifetime.BufferViews;
import dev.compute.memory.lifetime.Coherence;
import dev.compute.memory.lifetime.FileRange;
import dev.compute.memory.resource.Block;
import java.lang.foreign.MemorySegment;
import java.lang.ref.Reference;
import java.nio.file.Path;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
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

    private final PooledMemoryManager manager;
    private final BufferCore core;
    /** A slice keeps the buffer it is a range of reachable: that buffer is no leak while its slices are in use. */
    private final @Nullable UnifiedBuffer sliced;

    UnifiedBuffer(PooledMemoryManager manager, BufferCore core) {
        this(manager, core, null);
    }

    private UnifiedBuffer(PooledMemoryManager manager, BufferCore core, @Nullable UnifiedBuffer sliced) {
        this.manager = manager;
        this.core = core;
        this.sliced = sliced;
    }

    BufferCore core() {
        return core;
    }

    /** The buffer that owns this one's memory: itself, or for a slice the buffer it is a range of. */
    UnifiedBuffer memoryOwner() {
        return sliced != null ? sliced : this;
    }

    public MemoryLocation location() {
        return core.location();
    }

    /** The element type it was allocated by; {@link DataType#INT8} for buffers allocated by bytes. */
    public DataType dataType() {
        return core.dataType();
    }

    /** The bytes asked for (the pool may have set aside a little more); for a slice, the slice's bytes. */
    public long byteSize() {
        return core.byteSize();
    }

    public long elementCount() {
        return core.elementCount();
    }

    /** Where a slice starts in the buffer that owns its memory, in bytes; 0 for a buffer that is no slice. */
    public long byteOffset() {
        return core.byteOffset();
    }

    /** True for a range of another buffer made by {@link #slice}. */
    public boolean isSlice() {
        return core.isSlice();
    }

    /** Which copy is newer; a slice answers for the whole buffer it is a range of. */
    public BufferState state() {
        return core.state();
    }

    /** True once this buffer (or, for a slice, the slice or its buffer) was closed, or its manager was. */
    public boolean isClosed() {
        return core.isClosed();
    }

    /** True when host and device share this buffer's memory: one copy, syncs cost nothing. */
    public boolean isHostAccessible() {
        return core.isHostAccessible();
    }

    /** The manager that made this buffer. */
    public UnifiedMemoryManager manager() {
        return manager;
    }

    /** The file whose bytes this buffer is ({@link UnifiedMemoryManager#mapFile}, and its slices); null for pooled memory. */
    public @Nullable Path mappedFile() {
        FileRange range = core.mappedFrom();
        return range == null ? null : range.file();
    }

    /**
     * True for a buffer over a file mapped {@link FileMapMode#READ_ONLY} (and its slices): every way to write it (a
     * copy into it, an op that writes it, {@link #hostView()}, a writing access) fails with an
     * {@link UnsupportedOperationException} before it touches the memory.
     */
    public boolean isReadOnly() {
        return core.isReadOnly();
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

    /**
     * Writes all of {@code source} at {@code byteOffset}. {@code source} may be a heap or a native segment; a shared
     * arena another thread closes during the copy fails it with {@link IllegalStateException}, as Java's own copies do
     * (where the buffer lives on a device, such a segment goes to the driver through memory of the copy's own).
     */
    public void copyFrom(long byteOffset, MemorySegment source) {
        write(byteOffset, source);
    }

    /** Fills {@code destination} from {@code byteOffset} of this buffer; its arena's close meanwhile as for {@link #copyFrom(long, MemorySegment)}. */
    public void copyTo(long byteOffset, MemorySegment destination) {
        read(byteOffset, destination);
    }

    /**
     * Writes {@code source} at {@code byteOffset} without waiting. The device's driver reads {@code source} itself only
     * where no arena can free it meanwhile (the global arena's, or a segment the caller made from an address): that
     * memory must stay unchanged until the future completes. Any other segment (a confined, shared or automatic arena's)
     * is copied before this returns, so its arena may close as soon as the call returns. Closing the buffer before
     * the future completes is safe: its memory is reused only afterwards, whatever is done to the future.
     */
    public CompletableFuture<Void> copyFromAsync(long byteOffset, MemorySegment source) {
        return BufferCopies.writeAsync(core, byteOffset, source);
    }

    /**
     * Reads into {@code destination} from {@code byteOffset} without waiting. Into memory no arena can free (the global
     * arena's, or a segment the caller made from an address) the driver writes directly: leave it unread and unfreed
     * until the future completes. Into a confined arena of the calling thread, which no other thread may write, the
     * read is done before this returns. Into any other (a shared or automatic arena's), the bytes land in memory of the
     * copy's own and Java copies them into {@code destination} once they have landed; an arena closed meanwhile fails
     * the future with {@link IllegalStateException}. Cancelling or completing the future stops nothing.
     */
    public CompletableFuture<Void> copyToAsync(long byteOffset, MemorySegment destination) {
        return BufferCopies.readAsync(core, byteOffset, destination);
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
        BufferCopies.copy(source.core, sourceOffset, core, targetOffset, bytes);
    }

    /**
     * A writable view of the host copy (the memory itself where it is host-accessible), usable by the calling
     * thread until this buffer closes; marks the host copy newer. Taking several views on one thread costs one
     * confined arena in all. A file mapped read-only has none: this throws {@link UnsupportedOperationException}
     * there rather than hand out a segment whose first write would fail; take {@link #readOnlyHostView()}.
     */
    public MemorySegment hostView() {
        core.requireWritable("hostView()", "; take readOnlyHostView() to read it");
        return BufferViews.view(core, AccessMode.WRITE);
    }

    /** A read-only view of the host copy, brought up to date first; the state does not become host-dirty. */
    public MemorySegment readOnlyHostView() {
        return BufferViews.view(core, AccessMode.READ);
    }

    /**
     * An access to the host copy, brought up to date first, for the calling thread and until it is closed (use
     * try-with-resources): {@link BufferAccess#segment()} is the bytes. Ending a writing access marks the host copy
     * newer. The buffer's memory is not given back while the access is open, even if the buffer is closed.
     */
    public BufferAccess hostAccess(AccessMode mode) {
        return new BufferAccess(this, mode, BufferViews.Side.HOST, BufferViews.hostAccess(core, mode, BufferViews.Sharing.CONFINED));
    }

    /**
     * As {@link #hostAccess}, but the segment may be used by any thread. Ending it costs a handshake with every
     * thread of the JVM (tens of microseconds); it fails while a native call still holds the segment.
     */
    public BufferAccess sharedHostAccess(AccessMode mode) {
        return new BufferAccess(this, mode, BufferViews.Side.HOST, BufferViews.hostAccess(core, mode, BufferViews.Sharing.SHARED));
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
        return new BufferAccess(this, mode, BufferViews.Side.DEVICE, BufferViews.deviceAccess(core, mode));
    }

    /**
     * {@code count} elements (bytes for a buffer allocated by bytes) from element {@code offset}: a buffer of its
     * own over the same memory, for copies, ops, views, accesses and further slices, sharing this buffer's state.
     * It is valid while this buffer is open; closing the slice ends only the slice. Its host views are its range of
     * this buffer's views and last as they do (until the view scope they were taken in ends, or this buffer closes),
     * so that views of many short-lived slices cost no more than one view of this buffer.
     */
    public UnifiedBuffer slice(long offset, long count) {
        return new UnifiedBuffer(manager, core.slice(offset, count), sliced != null ? sliced : this);
    }

    /** Brings the device copy up to date with a newer host copy; nothing to do on host-accessible memory. */
    public void syncToDevice() {
        Coherence.syncToDevice(core);
    }

    /** Brings the host copy up to date with a newer device copy; nothing to do on host-accessible memory. */
    public void syncToHost() {
        Coherence.syncToHost(core);
    }

    /** Says the device copy was written by other means (a library that took the pointer): it is the newer one now. */
    public void markDeviceDirty() {
        Coherence.markDeviceDirty(core);
    }

    /**
     * Says the host copy was written by other means: it is the newer one now. There must be a host copy: a
     * discrete buffer has one once a view or a host access was taken.
     */
    public void markHostDirty() {
        Coherence.markHostDirty(core);
    }

    /**
     * Makes the buffer unusable at once; its memory goes back to the pool when the last view, access, op or copy
     * that holds it has ended and device work queued on it has finished. Harmless when already closed. Closing a
     * slice ends only the slice.
     */
    @Override
    public void close() {
        try {
            core.close();
        } finally {
            // reachable until the close is done: compiled code lets go of a handle at its last use, here before the
            // close (which may wait for another thread's copy), and the leak detector would find a closed buffer leaked
            Reference.reachabilityFence(this);
        }
    }

    @Override
    public String toString() {
        return core.toString();
    }

    /** The block of a buffer just allocated (not a slice, not yet closed), for the manager's books. */
    Block ownBlock() {
        return core.ownBlock();
    }

    boolean belongsTo(PooledMemoryManager owner) {
        return manager == owner;
    }

    private void write(long byteOffset, MemorySegment source) {
        BufferCopies.write(core, byteOffset, source);
    }

    private void read(long byteOffset, MemorySegment destination) {
        BufferCopies.read(core, byteOffset, destination);
    }
}
