package dev.compute.memory.lifetime;

import dev.compute.memory.BufferState;
import dev.compute.memory.DataType;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.resource.Block;
import dev.compute.memory.spi.QueuedWorkTimeoutException;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.function.Function;
import java.util.function.Supplier;
import java.util.function.ToLongFunction;
import org.jspecify.annotations.Nullable;

/**
 * What a buffer is, apart from its public handle: its identity (location, type, size, the range a slice covers, the
 * file it maps), its lifecycle (closed, and the ops and copies under way that hold it), its block, and the one door
 * every use of its memory passes ({@link #call}). The lifetime rule lives here: {@link #close()} makes it unusable at
 * once, and the block goes back exactly once, when the last view, access, op or copy has ended and device work queued
 * on it is done ({@link #releaseIfUnused}).
 *
 * <p>A buffer that owns memory is a root; a slice is a range of a root and keeps no state of its own but whether it was
 * closed. The fields below {@link #lifecycle} are a root's, guarded by its monitor; a slice uses its root's. A core
 * never refers to its public handle, so that a dropped handle is found as a leak (see {@link LeakDetector}).
 */
public final class BufferCore {

    static final CompletableFuture<Void> DONE = CompletableFuture.completedFuture(null);
    /** From {@link #discardWhereOnlyIdleViewsHold}: more than views outside any scope hold the memory now; ask again later. */
    public static final long NOT_NOW = -1;
    /** In {@link #lifecycle}: close() was called. */
    private static final int CLOSED = 1;
    /** In {@link #lifecycle}: one op or copy under way holds the memory (the count is kept above the flag). */
    private static final int HOLD = 2;

    final BufferHost host;
    final MemoryLocation location;
    final DataType dataType;
    final long byteSize;
    /** Whether the host addresses this memory itself (no mirror); fixed by its location and backend, so asked once. */
    private final boolean hostAccessible;
    private final @Nullable SliceOf slice;
    /** The file range this buffer's memory maps, for a buffer from {@code mapFile} and its slices; else null. */
    final @Nullable FileRange mappedFrom;
    /** CLOSED, plus HOLD for each op or copy under way; for a slice, only whether the slice itself was closed. */
    private int lifecycle;
    // A root's, guarded by its monitor.
    @Nullable Block block;
    @Nullable Block mirror;
    BufferState state;
    /** Device work queued on the memory; made on the first that is not done at once. */
    @Nullable WorkInFlight inFlight;
    /** Open views and accesses; made on the first. */
    private @Nullable BufferScopes scopes;
    /** The thread that allocated a root, by id, and whether another thread has used it since (set, never cleared). */
    private final long allocatingThread = Thread.currentThread().threadId();
    private volatile boolean usedElsewhere;
    /** The leak detector's watch, where this root is tracked; told of the close. */
    LeakDetector.@Nullable Watch leakWatch;
    /** What a budget counts this root by, handed back with its memory; guarded by its monitor. */
    private @Nullable Object budgetCount;

    private BufferCore(BufferHost host, MemoryLocation location, boolean hostAccessible, DataType dataType, long byteSize,
                       Block block, @Nullable FileRange mappedFrom, BufferState state) {
        this.host = host;
        this.location = location;
        this.hostAccessible = hostAccessible;
        this.dataType = dataType;
        this.byteSize = byteSize;
        this.slice = null;
        this.mappedFrom = mappedFrom;
        this.block = block;
        this.state = state;
    }

    private BufferCore(BufferCore cutFrom, long byteOffset, long byteSize) {
        this.host = cutFrom.host;
        this.location = cutFrom.location;
        this.hostAccessible = cutFrom.hostAccessible;
        this.dataType = cutFrom.dataType;
        this.byteSize = byteSize;
        this.slice = SliceOf.cut(cutFrom, byteOffset);
        this.mappedFrom = cutFrom.mappedFrom;
        this.state = BufferState.UNINITIALIZED; // a slice answers with its root's
    }

    /** A buffer of pooled memory, over {@code block}. */
    public static BufferCore of(BufferHost host, MemoryLocation location, DataType dataType, long byteSize, Block block) {
        return of(host, location, host.hostAccessible(location), dataType, byteSize, block, null);
    }

    /**
     * {@link #of}, where the caller knows whether the location is host-accessible, counted by a budget as
     * {@code budgetCount} (null: no budget's), which its release hands back.
     */
    public static BufferCore of(BufferHost host, MemoryLocation location, boolean hostAccessible, DataType dataType, long byteSize,
                                Block block, @Nullable Object budgetCount) {
        BufferCore core = new BufferCore(host, location, hostAccessible, dataType, byteSize, block, null, BufferState.UNINITIALIZED);
        core.budgetCount = budgetCount; // published with the core, as its block is
        return core;
    }

    /** Counts a root just made, not yet handed out, as {@code budgetCount}; false if its memory went back meanwhile. */
    public synchronized boolean countedAs(Object budgetCount) {
        if (block == null || slice != null) {
            return false;
        }
        this.budgetCount = budgetCount;
        return true;
    }

    /** A buffer over a mapped file: HOST memory whose one copy, the file's bytes, holds data from the start. */
    public static BufferCore mapped(BufferHost host, DataType dataType, Block mapping, FileRange range) {
        return new BufferCore(host, MemoryLocation.HOST, host.hostAccessible(MemoryLocation.HOST), dataType, mapping.size(), mapping,
                range, BufferState.SYNCHRONIZED);
    }

    // ---- identity -----------------------------------------------------------------------------------------------

    public MemoryLocation location() {
        return location;
    }

    public DataType dataType() {
        return dataType;
    }

    public long byteSize() {
        return byteSize;
    }

    public long elementCount() {
        return byteSize / dataType.byteSize();
    }

    /** Where a slice starts in its root, in bytes; 0 for a root. */
    public long byteOffset() {
        return slice == null ? 0 : slice.byteOffset();
    }

    public boolean isSlice() {
        return slice != null;
    }

    public @Nullable FileRange mappedFrom() {
        return mappedFrom;
    }

    public boolean isReadOnly() {
        return mappedFrom != null && mappedFrom.readOnly();
    }

    public boolean isHostAccessible() {
        return hostAccessible;
    }

    public boolean belongsTo(BufferHost owner) {
        return host == owner;
    }

    /** Which copy is newer; a slice answers for its root. */
    public BufferState state() {
        BufferCore root = root();
        synchronized (root) {
            return root.state;
        }
    }

    /** True once this buffer (or, for a slice, the slice or its buffer) was closed, or its manager was. */
    public boolean isClosed() {
        BufferCore root = root();
        synchronized (root) {
            return closedHere() || host.isClosed();
        }
    }

    /** The block of a root just allocated (not yet closed), for the manager's books. */
    public Block ownBlock() {
        synchronized (this) {
            if (block == null || slice != null) {
                throw new IllegalStateException(this + " has no block of its own");
            }
            return block;
        }
    }

    BufferCore root() {
        return slice == null ? this : slice.root();
    }

    @Override
    public String toString() {
        return "UnifiedBuffer[" + location + ", " + extent() + ", " + dataType + ", " + (isClosed() ? "closed" : state())
                + (mappedFrom == null ? "" : ", " + mappedFrom) + "]";
    }

    private String extent() {
        return slice == null ? byteSize + " bytes" : slice.extent(byteSize);
    }

    // ---- the door -----------------------------------------------------------------------------------------------

    /**
     * The door every use of this buffer's memory passes: counted in as a call (the manager's close waits for it), and
     * a fault on a file truncated under its mapping (this buffer's, {@code second}'s, or {@code other}, a segment that
     * may lie over one) thrown as {@link dev.compute.memory.MappedFileTruncatedException}, inside the call: once the
     * JIT has compiled a copy, the JVM delivers its fault late, and {@link FileRange#surfaceFaults} makes it arrive
     * here.
     */
    public <T> T call(@Nullable MemorySegment other, @Nullable BufferCore second, Supplier<T> body) {
        return call(other, second, body, (buffer, supplier) -> supplier.get());
    }

    /**
     * {@link #call(MemorySegment, BufferCore, Supplier)} for a body given this buffer and {@code argument}, for the hot
     * paths (a view): a body that captures nothing allocates nothing, and one level less of calls leaves the JIT room
     * to inline down to the segments a view makes, and so to make only the one it returns.
     */
    public <A, T> T call(@Nullable MemorySegment other, @Nullable BufferCore second, A argument, CallBody<A, T> body) {
        notice(Thread.currentThread());
        int call = host.enter(this);
        try {
            T result = body.run(this, argument);
            FileRange.surfaceFaults(mappedFrom, second == null ? null : second.mappedFrom, other);
            return result;
        } catch (RuntimeException | InternalError failure) {
            FileRange.failIfTruncated(failure, mappedFrom, second == null ? null : second.mappedFrom, other);
            throw failure;
        } finally {
            host.exit(call);
        }
    }

    /** Notes a use on {@code thread}: from another thread than the allocating one, the root is shared from then on. */
    private void notice(Thread thread) {
        BufferCore root = root();
        if (!root.usedElsewhere && thread.threadId() != root.allocatingThread) {
            root.usedElsewhere = true;
        }
    }

    /** True while only {@code thread}, which allocated this root, has used it: its views may be confined. Root only. */
    boolean usedByOneThread(Thread thread) {
        return !usedElsewhere && thread.threadId() == allocatingThread;
    }

    /**
     * Refuses a write to a file mapped read-only before anything reaches its memory: a write there is a fault that
     * Java code survives (the FFM API refuses it) but native code (a kernel, a driver's copy) does not.
     */
    public void requireWritable(String write, String instead) {
        if (isReadOnly()) {
            throw new UnsupportedOperationException(write + " would write " + this + ", whose file is mapped read-only"
                    + instead + "; map the file FileMapMode.READ_WRITE to change it");
        }
    }

    public void checkRange(long byteOffset, long length) {
        if (byteOffset < 0 || length < 0 || byteOffset > byteSize - length) {
            throw new IndexOutOfBoundsException("range [" + byteOffset + ", " + byteOffset + " + " + length
                    + ") is outside this buffer of " + byteSize + " bytes");
        }
    }

    // ---- slices -------------------------------------------------------------------------------------------------

    /** {@code count} elements from element {@code offset}: a core of its own over the same memory, valid while this one is open. */
    public BufferCore slice(long offset, long count) {
        long elements = elementCount();
        if (offset < 0 || count <= 0 || offset > elements - count) {
            throw new IndexOutOfBoundsException("slice [" + offset + ", " + offset + " + " + count + ") is outside "
                    + this + " of " + elements + " elements" + (count <= 0 ? " (a slice needs at least one element)" : ""));
        }
        BufferCore root = root();
        synchronized (root) {
            openBlock();
        }
        long unit = dataType.byteSize();
        return new BufferCore(this, byteOffset() + offset * unit, count * unit);
    }

    // ---- waiting for device work -------------------------------------------------------------------------------------

    /**
     * Runs {@code action} under the root's monitor once no device work is in flight on the memory. The wait happens
     * without the monitor, so that close(), state() or toString() on another thread never wait behind device work
     * (which a thread blocked on them might be the one to complete). A closed buffer fails at once, without waiting.
     */
    <T> T whenIdle(Function<BufferCore, T> action) {
        return WorkInFlight.after(this, WorkInFlight.ALL, action, (buffer, root, function) -> function.apply(root));
    }

    /** The body of a {@link #call}: given the buffer called and the call's argument. */
    @FunctionalInterface
    public interface CallBody<A, T> {
        T run(BufferCore buffer, A argument);
    }

    /** Every piece of device work in flight on the memory, as one future. Root only, under its monitor. */
    CompletableFuture<?> inFlightAll() {
        CompletableFuture<?> work = inFlight == null ? DONE : inFlight.all();
        BufferScopes open = scopes;
        CompletableFuture<?> intoViews = open == null ? null : open.leftQueuedInto(); // a copy into a view of it timed out
        return intoViews == null ? work : CompletableFuture.allOf(work, intoViews);
    }

    /** Remembers device work queued on the memory. Root only, under its monitor. */
    void recordInFlight(CompletableFuture<?> work) {
        if (work.isDone()) {
            return;
        }
        if (inFlight == null) {
            inFlight = new WorkInFlight(host.backend());
        }
        inFlight.add(work);
    }

    /**
     * Where {@code failure} of a copy on the memory says it left device work queued there ({@link
     * QueuedWorkTimeoutException}), remembers that work as in flight, so that the memory is not reused under it. Root
     * only, under its monitor.
     */
    void recordLeftQueued(Throwable failure) {
        CompletableFuture<?> queued = QueuedWorkTimeoutException.leftQueuedBy(failure);
        if (queued != null) {
            recordInFlight(queued);
        }
    }

    /**
     * As {@link #recordLeftQueued(Throwable)}, for a copy with the caller's {@code memory}: where that is a view or
     * access of the calling thread onto another buffer (a PINNED buffer's, which a driver reads or writes directly),
     * that buffer's memory waits for the work too ({@link ScopeRegistry#leftQueuedInto}).
     */
    void recordLeftQueued(Throwable failure, MemorySegment memory) {
        CompletableFuture<?> queued = QueuedWorkTimeoutException.leftQueuedBy(failure);
        if (queued != null) {
            recordInFlight(queued);
            try {
                host.scopes().leftQueuedInto(memory, queued);
            } catch (RuntimeException | Error e) { // the copy's own failure is the one thrown
                failure.addSuppressed(e);
            }
        }
    }

    /** The root's block, if this buffer may be used; under the root's monitor. */
    Block openBlock() {
        BufferCore root = root();
        if (closedHere() || root.block == null) {
            throw new IllegalStateException(describeClosed());
        }
        if (host.isClosed()) {
            throw new IllegalStateException(closedByManager());
        }
        return root.block;
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

    /** What a call on this buffer says once its manager is closed. */
    public String closedByManager() {
        return describeClosed() + " because its UnifiedMemoryManager was closed";
    }

    private String describeClosed() {
        String why = "";
        if (slice != null && (lifecycle & CLOSED) == 0) {
            why = (slice.root().lifecycle & CLOSED) != 0 ? " (the buffer it is a slice of was closed)" : " (the slice it was cut from was closed)";
        }
        return "UnifiedBuffer[" + location + ", " + extent() + ", " + dataType + (mappedFrom == null ? "" : ", " + mappedFrom) + "] is closed" + why;
    }

    /** Under the root's monitor: one more op or copy holds the memory, until {@link #unhold} (see {@link Holds}). */
    void hold() {
        lifecycle += HOLD;
    }

    /** Under the root's monitor: a hold taken with {@link #hold} ended; the caller then calls {@link #releaseIfUnused}. */
    void unhold() {
        lifecycle -= HOLD;
    }

    // ---- close and release ------------------------------------------------------------------------------------------

    /**
     * Makes the buffer unusable at once; its memory goes back to the pool when the last view, access, op or copy that
     * holds it has ended and device work queued on it has finished. Harmless when already closed. Closing a slice ends
     * only the slice (and its slices): its views are ranges of the buffer's views and end with them.
     */
    public void close() {
        host.scopes().endHandedOver(); // no notice of the thread: after the close no view can be taken
        if (slice != null) {
            synchronized (slice.root()) {
                lifecycle |= CLOSED;
            }
            return;
        }
        BufferScopes open;
        Block device = null;
        Block hostCopy = null;
        Object counted = null;
        CompletableFuture<?> pending = DONE;
        boolean heldFromTheClose;
        synchronized (this) {
            if ((lifecycle & CLOSED) != 0) {
                return;
            }
            lifecycle |= CLOSED;
            open = scopes;
            if (open == null && lifecycle == CLOSED) { // the common case, released under the one lock
                device = block;
                hostCopy = mirror;
                counted = budgetCount;
                pending = inFlightAll();
                block = null;
                mirror = null;
                inFlight = null;
            }
            heldFromTheClose = device == null && reportHeldIfOthersMayRelease(open);
        }
        LeakDetector.Watch watch = leakWatch;
        if (watch != null) {
            watch.closed();
        }
        if (device != null) {
            host.release(location, device, hostCopy, pending, counted);
            return;
        }
        if (open != null) {
            open.closeViews(this::releaseIfUnused);
        }
        boolean unreleased = heldFromTheClose || reportHeldIfUnreleased();
        if (unreleased && !hostAccessible) { // views of its host mirror may be all that holds the device memory: it need not wait for them
            releaseIfUnused();
        }
    }

    /**
     * Under the monitor, as the close marks the root closed: where another thread may give the memory back (its view or
     * access ending, an op or copy under way on it returning), the memory is reported held now: were it reported once
     * this close had ended its own views, a release another thread made meanwhile would leave the close nothing to
     * report while that free was still on its way, and a read of the figures after the close would count the closed
     * buffer as live. Where only this thread's scopes hold it (the common case of a view taken and the buffer closed here), the
     * close ends them itself and nothing enters the held figures; a root no other thread has used has no scope of
     * another's (one opens under this monitor, after its thread's use was noticed), and its scopes are not looked
     * through. True when reported.
     */
    private boolean reportHeldIfOthersMayRelease(@Nullable BufferScopes open) {
        Thread current = Thread.currentThread();
        if (lifecycle == CLOSED && (open == null || usedByOneThread(current) || open.onlyConfinedTo(current))) {
            return false;
        }
        host.held(this, Objects.requireNonNull(block), mirror);
        return true;
    }

    /**
     * Tells the host the closed root's memory is held, if what this thread could end (its own views) did not free it:
     * so the common close, with only this thread's views open, never enters the held figures. Under the monitor, so a
     * release by the last holder comes either before (nothing to report) or after. True when reported.
     */
    private boolean reportHeldIfUnreleased() {
        synchronized (this) {
            if (block != null) {
                host.held(this, block, mirror);
                return true;
            }
            return false;
        }
    }

    /**
     * The buffer's handle was collected without close(): closed now, its memory back once the views and accesses still
     * open on it have ended (nobody can end them any more, so they all are) and device work on it is done.
     */
    void closeLeaked() {
        BufferScopes open;
        boolean heldFromTheClose;
        synchronized (this) {
            if ((lifecycle & CLOSED) != 0) {
                return;
            }
            lifecycle |= CLOSED;
            open = scopes;
            heldFromTheClose = block != null && reportHeldIfOthersMayRelease(open);
        }
        if (open != null) {
            open.closeAll(this::releaseIfUnused);
        } else {
            releaseIfUnused();
        }
        boolean unreleased = heldFromTheClose || reportHeldIfUnreleased();
        if (unreleased && !hostAccessible) {
            releaseIfUnused();
        }
    }

    /**
     * Gives the memory back once closed and nothing holds it; exactly once. Root only. Where views alone hold it, of a
     * device buffer's host mirror, the device memory goes back first: they reach the mirror, never the device block, so
     * the scarce memory does not wait for a view on an idle thread; the mirror goes back when they end.
     */
    void releaseIfUnused() {
        Block device;
        Block hostCopy;
        Object counted;
        CompletableFuture<?> pending;
        synchronized (this) {
            if (lifecycle != CLOSED || (block == null && mirror == null)) {
                return;
            }
            if (scopes != null && !scopes.isEmpty()) {
                if (block == null || mirror == null || hostAccessible || !scopes.onlyViews()) {
                    return;
                }
                device = block;
                counted = budgetCount;
                pending = inFlightAll();
                block = null;
                budgetCount = null;
                host.heldMirrorOnly(this, device, mirror); // before the device's release: the mirror never reads as live
                hostCopy = null;
            } else {
                device = block;
                hostCopy = mirror;
                counted = budgetCount;
                pending = inFlightAll();
                block = null;
                mirror = null;
                inFlight = null;
            }
        }
        if (device != null) {
            host.release(location, device, hostCopy, pending, counted);
        } else {
            host.releaseMirror(Objects.requireNonNull(hostCopy), pending);
        }
    }

    /**
     * Where only views taken outside any view scope hold this closed root (no access, op or copy, and no device work
     * still running on its memory, which a kernel may be reading for a live buffer's result), hands the host memory
     * they reach (the buffer's block, or a device buffer's mirror) to {@code discard}, under the monitor, so that no
     * release gives it to the pool meanwhile; returns what {@code discard} did (0 where it has no host memory: nothing
     * would ever be given back), or {@link #NOT_NOW} where something other than such views holds it, which may end. A
     * mapped file's pages are the file's: never handed.
     */
    public synchronized long discardWhereOnlyIdleViewsHold(ToLongFunction<Block> discard) {
        if (lifecycle != CLOSED || scopes == null || !scopes.onlyViewsOutsideViewScopes() || !inFlightAll().isDone()) {
            return NOT_NOW;
        }
        Block reached = hostAccessible ? block : mirror;
        return reached == null || mappedFrom != null ? 0 : discard.applyAsLong(reached);
    }

    /** What holds this root's memory now: for a warning about memory a closed root has held for long. */
    public HeldBy heldBy() {
        BufferScopes open;
        boolean ops;
        synchronized (this) {
            open = scopes;
            ops = lifecycle >= HOLD;
        }
        return open == null ? new HeldBy(List.of(), ops, false) : new HeldBy(open.holders(), ops, open.viewsInOpenViewScopes());
    }

    /** The open views and accesses of this root; made on the first. Root only, under its monitor. */
    BufferScopes scopes() {
        BufferScopes open = scopes;
        if (open == null) {
            open = new BufferScopes();
            scopes = open;
        }
        return open;
    }

    /** Root only, under its monitor: see {@link BufferScopes#refuseDeviceWriteUnderHostWrite}. */
    void refuseDeviceWriteUnderHostWrite(BufferCore buffer, String what) {
        if (scopes != null) { // set under the monitor, as this runs
            scopes.refuseDeviceWriteUnderHostWrite(buffer, what);
        }
    }

    /** Under the monitor: an open root of pooled memory that no op, copy, view or access holds now. */
    boolean unheld() {
        return slice == null && lifecycle == 0 && block != null && (scopes == null || scopes.isEmpty()) && !host.isClosed();
    }
}
