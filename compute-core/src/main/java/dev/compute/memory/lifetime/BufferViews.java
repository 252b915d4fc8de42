package dev.compute.memory.lifetime;

import dev.compute.memory.AccessMode;
import dev.compute.memory.resource.Block;
import dev.compute.memory.spi.DeviceHandle;
import dev.compute.memory.spi.WorkGroup;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;

/**
 * The ways in to a buffer's bytes that hold it open: views (one scope per buffer and thread, open until the buffer
 * closes), host accesses and device accesses (a scope each, open until ended), and what ending an access records.
 * Each opens a {@link MemoryScope}; the segments handed out live in its arena and stop working when it ends.
 */
public final class BufferViews {

    /** Which threads may use and end a scope's segments. */
    public enum Sharing {
        /** The opening thread only: cheap, ended without a handshake. */
        CONFINED,
        /** Any thread: ending it costs a handshake with every thread. */
        SHARED
    }

    /**
     * An access as it opens: its scope, the bytes where the host can address them (null for device memory it cannot),
     * their offset in the backend's allocation, and the backend's native handle ({@link DeviceHandle#NONE} for a host
     * access).
     */
    public record Opened(MemoryScope scope, @Nullable MemorySegment memory, long offset, DeviceHandle handle) {}

    private BufferViews() {}

    /**
     * A view of the host copy, brought up to date, usable by the calling thread until the buffer closes; a writable
     * one marks the host copy newer. Several views of one buffer on one thread share one scope, those of its slices
     * too: a view of a slice is the slice's range of the root's view, so that views of fresh slices (a long-lived
     * buffer read in pieces) add no scope each, kept until the buffer closes.
     */
    public static MemorySegment view(BufferCore buffer, AccessMode mode) {
        return buffer.call(null, null, mode, (called, viewMode) -> WorkInFlight.after(called, WorkInFlight.ALL, viewMode, BufferViews::viewWhenIdle));
    }

    private static MemorySegment viewWhenIdle(BufferCore buffer, BufferCore root, AccessMode mode) {
        // WorkInFlight.after found the block open, under this hold
        long address = Coherence.currentHostAddress(root, Objects.requireNonNull(root.block), buffer.byteOffset(), buffer.byteSize);
        if (mode.writes()) {
            root.state = Coherence.hostWritten(root);
        }
        MemorySegment view = viewScope(root).bind(address, buffer.byteSize);
        return mode.writes() ? view : view.asReadOnly();
    }

    /**
     * The scope a view of the root or of one of its slices taken on this thread lives in, made on the first: inside a
     * {@link ViewRegions region}, a confined one the region ends; outside any, confined where this thread allocated the
     * buffer and no other thread has used it (its close here ends it at once), else the buffer's shared one, which any
     * thread can end, so that closing the buffer anywhere gives its memory back at once. Under the root's monitor.
     */
    private static MemoryScope viewScope(BufferCore root) {
        Thread current = Thread.currentThread();
        ViewRegions.Region region = ViewRegions.current();
        MemoryScope confined = root.scopes().viewOf(current, region);
        if (confined != null) {
            return confined;
        }
        if (region != null || root.usedByOneThread(current)) {
            MemoryScope opened = root.host.scopes().open(MemoryScope.Kind.VIEW, Sharing.CONFINED, root.scopes());
            if (region != null) {
                opened.region = region;
                region.add(opened);
            }
            return opened;
        }
        MemoryScope shared = root.scopes().sharedView();
        return shared != null ? shared : root.host.scopes().open(MemoryScope.Kind.VIEW, Sharing.SHARED, root.scopes());
    }

    /** An access to the host copy, brought up to date first; a writing one marks the host copy newer. */
    public static Opened hostAccess(BufferCore buffer, AccessMode mode, Sharing sharing) {
        Objects.requireNonNull(mode, "mode");
        if (mode.writes() && buffer.isReadOnly()) { // the message made only where it is thrown: not on every access
            buffer.requireWritable("a " + mode + " host access", "; open a READ access to read it");
        }
        return buffer.call(null, null, HostAccess.of(mode, sharing),
                (called, asked) -> WorkInFlight.after(called, WorkInFlight.ALL, asked, BufferViews::hostAccessWhenIdle));
    }

    /** What a host access asks for, one constant per mode and sharing: as a call's argument, it allocates nothing. */
    private record HostAccess(AccessMode mode, Sharing sharing) {
        private static final HostAccess[][] ALL = new HostAccess[AccessMode.values().length][Sharing.values().length];

        static {
            for (AccessMode mode : AccessMode.values()) {
                for (Sharing sharing : Sharing.values()) {
                    ALL[mode.ordinal()][sharing.ordinal()] = new HostAccess(mode, sharing);
                }
            }
        }

        static HostAccess of(AccessMode mode, Sharing sharing) {
            return ALL[mode.ordinal()][sharing.ordinal()];
        }
    }

    private static Opened hostAccessWhenIdle(BufferCore buffer, BufferCore root, HostAccess asked) {
        // WorkInFlight.after found the block open, under this hold
        MemorySegment bytes = Coherence.currentHostRange(root, Objects.requireNonNull(root.block), buffer.byteOffset(), buffer.byteSize);
        if (asked.mode.writes()) {
            root.state = Coherence.hostWritten(root);
        }
        MemoryScope scope = root.host.scopes().open(MemoryScope.Kind.ACCESS, asked.sharing, root.scopes(),
                asked.mode.writes() ? asked.mode : null);
        return new Opened(scope, bytes, 0, DeviceHandle.NONE);
    }

    /**
     * An access to the device copy for one's own native code, on the calling thread: a newer host copy is synced first,
     * and the thread's queue is ordered after device work in flight on the buffer (on the device where the backend can,
     * else by waiting on the host); a writing one marks the device copy newer.
     */
    public static Opened deviceAccess(BufferCore buffer, AccessMode mode) {
        Objects.requireNonNull(mode, "mode");
        if (mode.writes() && buffer.isReadOnly()) { // the message made only where it is thrown: not on every access
            buffer.requireWritable("a " + mode + " device access", "; open a READ access to read it");
        }
        // a call and a wait that capture nothing: every device access passes here
        return buffer.call(null, null, mode, BufferViews::openDevice);
    }

    /**
     * What a device access holds once ordered: the device block and the access's scope; then its handle, with which it
     * records the access's work should the scope end without the access (one object for both, on every device access).
     */
    private static final class Held implements MemoryScope.UnendedAccess {
        private final BufferCore buffer;
        private final AccessMode mode;
        private final Block device;
        private final MemoryScope scope;
        /** Set before the scope is given this to run: published by the scope's monitor. */
        private @Nullable DeviceHandle handle;

        Held(BufferCore buffer, AccessMode mode, Block device, MemoryScope scope) {
            this.buffer = buffer;
            this.mode = mode;
            this.device = device;
            this.scope = scope;
        }

        /** The scope ends without the access. */
        @Override
        public void record() {
            endedUnended(buffer, mode, Objects.requireNonNull(handle));
        }

        @Override
        public void ended() {
            releaseDeviceMemoryUnderViews(buffer.root());
        }
    }

    private static Opened openDevice(BufferCore buffer, AccessMode mode) {
        BufferCore root = buffer.root();
        Held held = WorkInFlight.after(buffer, WorkInFlight.UNORDERED, mode, BufferViews::deviceWhenOrdered);
        long offset = held.device.offset() + buffer.byteOffset();
        DeviceHandle handle;
        try {
            handle = root.host.backend().openDeviceHandle(held.device.segment(), offset, buffer.byteSize, mode);
        } catch (RuntimeException e) {
            held.scope.end();
            throw e;
        }
        held.handle = handle;
        held.scope.onEndWithoutTheAccess(held);
        if (mode.writes()) {
            synchronized (root) {
                root.state = Coherence.deviceWritten(root);
            }
        }
        MemorySegment host = held.device.segment().hostSegment();
        return new Opened(held.scope, host == null ? null : host.asSlice(offset, buffer.byteSize), offset, handle);
    }

    private static Held deviceWhenOrdered(BufferCore buffer, BufferCore root, AccessMode mode) {
        Block open = buffer.openBlock();
        if (mode.writes()) {
            root.refuseDeviceWriteUnderHostWrite(buffer, "a " + mode + " device access to");
        }
        if (root.state.hostIsNewer()) {
            Coherence.copyMirrorToDevice(root, open);
        }
        return new Held(buffer, mode, open, root.host.scopes().open(MemoryScope.Kind.ACCESS, Sharing.CONFINED, root.scopes()));
    }

    /**
     * An access ends, with the device work in flight on its bytes: a writing access makes the copy it wrote (the
     * device's for a device access, the host's for a host access) the newer one.
     */
    private static void ended(BufferCore buffer, Side side, AccessMode mode, CompletableFuture<?> work) {
        BufferCore root = buffer.root();
        synchronized (root) {
            root.recordInFlight(work);
            if (mode.writes()) {
                root.state = side == Side.DEVICE ? Coherence.deviceWritten(root) : Coherence.hostWritten(root);
            }
        }
    }

    /**
     * Ends an access: a device access records the work queued on its handle (and {@code recorded}, work the caller
     * recorded through it) as in flight and, when writing, marks the device copy newer; a writing host access marks the
     * host copy newer. Its scope ends, and the buffer's memory may go back. Counted in as a call the manager's close
     * waits for, even on a closed manager. {@code stillInUse} is given {@code access} when a native call still holds a
     * shared access's segment: the access stays open, to be ended again once the call returned. An access passes itself
     * and a method that captures nothing, so that its end makes no lambda.
     */
    public static <T> void end(BufferCore buffer, Side side, AccessMode mode, MemoryScope scope, DeviceHandle handle,
                               CompletableFuture<?> recorded, T access, Consumer<T> stillInUse) {
        int call = buffer.host.enterToEnd();
        try {
            scope.accessEnded();
            if (side == Side.DEVICE && scope.isOpen()) { // ended by the manager's close: the backend may be gone, nothing to record
                CompletableFuture<Void> queued;
                try {
                    queued = handle.end();
                } catch (RuntimeException unrecorded) {
                    // what the handle queued is unknown: wait for the device before the memory may be reused
                    ended(buffer, Side.DEVICE, mode, recorded);
                    buffer.host.awaitDeviceIdle();
                    throw unrecorded;
                }
                // a group, not allOf: each piece stays one the backend can order later work after on the device (a kernel's
                // place on the queue), where a plain allOf would make the next access wait for it on the host
                ended(buffer, Side.DEVICE, mode, recorded.isDone() ? queued : WorkGroup.of(List.of(queued, recorded)));
            } else {
                ended(buffer, side, mode, recorded);
            }
        } finally {
            try {
                scope.end();
            } catch (IllegalStateException inUseByNativeCall) {
                stillInUse.accept(access);
                throw inUseByNativeCall;
            } finally {
                releaseDeviceMemoryUnderViews(buffer.root());
                buffer.host.exit(call);
            }
        }
    }

    /**
     * A closed device buffer that views of its host mirror alone may hold now that an access ended: its device memory
     * need not wait for them. A free refused here is on behalf of the buffer's close: told, not thrown into the end.
     */
    private static void releaseDeviceMemoryUnderViews(BufferCore root) {
        if (root.isHostAccessible()) {
            return;
        }
        try {
            root.releaseIfUnused();
        } catch (RuntimeException | Error e) {
            ScopeRegistry.releaseFailed(e);
        }
    }

    /**
     * A device access whose scope ends without the access: its thread died with it open, or its buffer was collected.
     * The work queued through its handle may still run, so it is recorded before the memory may go back; where the
     * handle cannot say what it queued (its backend closing), the device is waited for, bounded.
     */
    private static void endedUnended(BufferCore buffer, AccessMode mode, DeviceHandle handle) {
        int call = buffer.host.enterToEnd(); // a close that starts meanwhile waits for this before it closes the backend
        try {
            if (buffer.host.isClosed()) {
                return; // the manager's close: the backend may be gone, and the close waits for the device before it frees
            }
            CompletableFuture<Void> queued;
            try {
                queued = handle.end();
            } catch (RuntimeException | Error unrecorded) {
                buffer.host.awaitDeviceIdle();
                return;
            }
            ended(buffer, Side.DEVICE, mode, queued);
        } finally {
            buffer.host.exit(call);
        }
    }

    /** Which copy an access reached. */
    public enum Side { HOST, DEVICE }
}
