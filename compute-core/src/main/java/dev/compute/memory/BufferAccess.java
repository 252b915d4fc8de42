package dev.compute.memory;

import dev.compute.memory.lifetime.BufferViews;
import dev.compute.memory.lifetime.MemoryScope;
import dev.compute.memory.resource.NothingInFlight;
import dev.compute.memory.spi.DeviceHandle;
import dev.compute.memory.spi.WorkGroup;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import org.jspecify.annotations.Nullable;

/**
 * A counted, scoped access to a buffer's bytes, from {@link UnifiedBuffer#hostAccess},
 * {@link UnifiedBuffer#sharedHostAccess} or {@link UnifiedBuffer#deviceAccess}; use it in try-with-resources.
 * While it is open the buffer's memory stays where it is, even if the buffer or its manager is closed meanwhile:
 * the memory goes back to the pool only after the access has ended. Everything it hands out works only while it
 * is open: its {@link #segment()} fails with an {@link IllegalStateException} afterwards, and native handles must
 * not be used afterwards.
 *
 * <p>A host or device access belongs to the thread that opened it: only that thread may use its segment or end
 * it. A shared host access may be used and ended by any thread.
 *
 * <pre>{@code
 * try (BufferAccess access = buffer.deviceAccess(AccessMode.READ_WRITE)) {
 *     CudaDeviceHandle cuda = access.handle(CudaDeviceHandle.class);
 *     cuLaunchKernel(function, blocks, 1, 1, 256, 1, 1, 0, cuda.stream(),
 *             Pointer.to(Pointer.to(cuda.pointer()), Pointer.to(new int[] {n})), null);
 * } // the launch is recorded as in flight; the device copy is now the newer one
 * }</pre>
 */
public final class BufferAccess implements AutoCloseable {

    private final UnifiedBuffer buffer;
    private final AccessMode mode;
    private final BufferViews.Side side;
    private final MemoryScope scope;
    private final @Nullable MemorySegment memory;
    private final long offset;
    private final DeviceHandle handle;
    private @Nullable MemorySegment segment;
    private CompletableFuture<?> recorded = NothingInFlight.FUTURE;
    private boolean closed;

    BufferAccess(UnifiedBuffer buffer, AccessMode mode, BufferViews.Side side, BufferViews.Opened opened) {
        this.buffer = buffer;
        this.mode = mode;
        this.side = side;
        this.scope = opened.scope();
        this.memory = opened.memory();
        this.offset = opened.offset();
        this.handle = opened.handle();
    }

    public UnifiedBuffer buffer() {
        return buffer;
    }

    public AccessMode mode() {
        return mode;
    }

    /** True for a device access, false for a host access. */
    public boolean isDeviceAccess() {
        return side == BufferViews.Side.DEVICE;
    }

    /** True for a shared host access, which any thread may use and end. */
    public boolean isShared() {
        return scope.shared();
    }

    public long byteSize() {
        return buffer.byteSize();
    }

    /**
     * The bytes: for a host access the host copy, for a device access the device memory where the host can
     * address it (every location on the CPU backend; PINNED and UNIFIED on accelerators). Read-only for a
     * {@link AccessMode#READ} access. The segment stops working when the access ends.
     */
    public synchronized MemorySegment segment() {
        checkOpen();
        if (segment == null) {
            if (memory == null) {
                throw new IllegalStateException(buffer.location() + " memory of " + buffer
                        + " is device memory the host cannot address: use handle(...) for native code, or a host access");
            }
            MemorySegment bound = scope.bind(memory);
            segment = mode.writes() ? bound : bound.asReadOnly();
        }
        return segment;
    }

    /**
     * Where the bytes start in the backend allocation the pool carved them from, in bytes (a device access): what
     * alignment native code can count on. The allocation itself is not handed out: it reaches memory beyond this
     * buffer and outlives it; {@link #handle(Class)} gives native code what it needs for these bytes only.
     */
    public long offset() {
        checkOpen();
        if (!isDeviceAccess()) {
            throw new IllegalStateException("a host access has no device offset; open a device access");
        }
        return offset;
    }

    /**
     * The backend's native handle for these bytes (a device access): {@code CudaDeviceHandle} on CUDA,
     * {@code OpenClDeviceHandle} on OpenCL. The CPU backend has none: use {@link #segment()}.
     */
    public <T extends DeviceHandle> T handle(Class<T> type) {
        Objects.requireNonNull(type, "type");
        checkOpen();
        if (!isDeviceAccess()) {
            throw new IllegalStateException("a host access has no native handle; open a device access");
        }
        if (!type.isInstance(handle)) {
            String backend = buffer.manager().backendInfo().backend();
            throw new IllegalStateException("the " + backend + " backend has no " + type.getSimpleName() + " for its memory"
                    + (handle == DeviceHandle.NONE ? "; its memory is reached through segment()" : "; it hands out "
                    + handle.getClass().getSimpleName()));
        }
        return type.cast(handle);
    }

    /**
     * Device work on these bytes is in flight until {@code work} completes (work queued on a stream or queue of
     * one's own, beside what the handle records itself): the buffer's memory is neither reused nor read by the host
     * before then.
     */
    public synchronized void inFlightUntil(CompletableFuture<?> work) {
        Objects.requireNonNull(work, "work");
        checkOpen();
        recorded = recorded.isDone() ? work : WorkGroup.of(List.of(recorded, work)); // pieces the backend may order after on the device
    }

    public synchronized boolean isOpen() {
        return !closed && scope.isOpen();
    }

    /**
     * Ends the access: a writing host access marks the host copy newer; a device access records the device work
     * queued on its handle as in flight and, when writing, marks the device copy newer. Its segment stops working.
     * Harmless when already ended. Only the opening thread may end a confined access.
     */
    @Override
    public void close() {
        CompletableFuture<?> work;
        synchronized (this) {
            if (closed) {
                return;
            }
            Thread owner = scope.owner();
            if (owner != null && owner != Thread.currentThread()) {
                throw new WrongThreadException("this access belongs to thread '" + owner.getName()
                        + "' and only it may end it (a shared host access may be ended by any thread)");
            }
            closed = true;
            work = recorded;
        }
        BufferViews.end(buffer.core(), side, mode, scope, handle, work, this, BufferAccess::stillInUse);
    }

    /** A shared access a native call still holds: end it again once the call returned. */
    private static void stillInUse(BufferAccess access) {
        synchronized (access) {
            access.closed = false;
        }
    }

    private void checkOpen() {
        if (closed || !scope.isOpen()) {
            throw new IllegalStateException("this access to " + buffer + " has ended");
        }
    }

    @Override
    public String toString() {
        return (isDeviceAccess() ? "device" : scope.shared() ? "shared host" : "host") + " " + mode + " access to " + buffer
                + (isOpen() ? "" : " (ended)");
    }
}
