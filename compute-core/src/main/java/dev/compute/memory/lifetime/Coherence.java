package dev.compute.memory.lifetime;

import dev.compute.memory.BufferState;
import dev.compute.memory.lifetime.BufferHost.Transfer;
import dev.compute.memory.resource.Block;
import dev.compute.memory.spi.NativeAllocation;
import java.lang.foreign.MemorySegment;
import java.util.Objects;

/**
 * Which of a root's copies is newer, and how the other is brought up to date: the state machine of
 * {@link BufferState}, the syncs, the host mirror a discrete buffer makes on first need, and copies between the
 * caller's memory and whichever copy they should go to. On memory the host can address there is one copy, and syncs
 * do nothing. The public methods are a buffer's syncs and marks; the others work on a root, under its monitor.
 */
public final class Coherence {

    private Coherence() {}

    /** Brings the device copy up to date with a newer host copy; nothing to do on host-accessible memory. */
    public static void syncToDevice(BufferCore buffer) {
        buffer.call(null, null, () -> buffer.whenIdle(root -> {
            Block device = buffer.openBlock();
            if (!root.isHostAccessible() && root.state.hostIsNewer()) {
                copyMirrorToDevice(root, device);
            }
            return null;
        }));
    }

    /** Brings the host copy up to date with a newer device copy; nothing to do on host-accessible memory. */
    public static void syncToHost(BufferCore buffer) {
        buffer.call(null, null, () -> buffer.whenIdle(root -> {
            Block device = buffer.openBlock();
            if (!root.isHostAccessible() && root.state.deviceIsNewer()) {
                currentHostBlock(root, device);
            }
            return null;
        }));
    }

    /**
     * The device copy was written by other means (a library that took the pointer): it is the newer one now. On
     * host-accessible memory, its one copy holds data from then on: a buffer never written by the manager would
     * otherwise still read as UNINITIALIZED, whose bytes a compaction does not take along.
     */
    public static void markDeviceDirty(BufferCore buffer) {
        BufferCore root = buffer.root();
        synchronized (root) {
            buffer.openBlock();
            root.state = deviceWritten(root);
        }
    }

    /**
     * The host copy was written by other means: it is the newer one now (on host-accessible memory, its one copy holds
     * data, as {@link #markDeviceDirty} says). A discrete buffer must have a host copy.
     */
    public static void markHostDirty(BufferCore buffer) {
        BufferCore root = buffer.root();
        synchronized (root) {
            buffer.openBlock();
            if (!root.isHostAccessible() && root.mirror == null) {
                throw new IllegalStateException(buffer + " has no host copy to be newer: it is made by hostView() or hostAccess()");
            }
            root.state = hostWritten(root);
        }
    }


    /** The state after the device copy was written. */
    static BufferState deviceWritten(BufferCore root) {
        return root.isHostAccessible() ? BufferState.SYNCHRONIZED
                : root.mirror == null ? BufferState.DEVICE_ONLY : BufferState.DEVICE_DIRTY;
    }

    /** The state after the host copy was written. */
    static BufferState hostWritten(BufferCore root) {
        if (root.isHostAccessible()) {
            return BufferState.SYNCHRONIZED;
        }
        return root.state == BufferState.UNINITIALIZED || root.state == BufferState.HOST_ONLY ? BufferState.HOST_ONLY : BufferState.HOST_DIRTY;
    }

    /** Where a read of a discrete buffer comes from: the mirror when it is at least as new as the device. */
    static boolean readsFromDevice(BufferCore root) {
        return root.mirror == null || !(root.state.hostIsNewer() || root.state == BufferState.SYNCHRONIZED);
    }

    /** Copies the newer host mirror to the device. */
    static void copyMirrorToDevice(BufferCore root, Block device) {
        Block host = Objects.requireNonNull(root.mirror);
        toDevice(root, rootBytes(root, host), device, device.offset());
        root.host.count(Transfer.HOST_TO_DEVICE, root.location, root.byteSize);
        root.state = BufferState.SYNCHRONIZED;
    }

    /**
     * {@code byteSize} bytes at {@code byteOffset} of the host copy as it should be read now ({@link #currentHostBlock}),
     * cut in one step: a view or an access makes only the segment it hands out, where a slice of the root's slice would
     * cost one more (escape analysis gives up on it at the depth a view's call reaches).
     */
    static MemorySegment currentHostRange(BufferCore root, Block device, long byteOffset, long byteSize) {
        Block copy = currentHostBlock(root, device);
        return hostSegment(copy).asSlice(copy.offset() + byteOffset, byteSize);
    }

    /**
     * Where {@link #currentHostRange} starts, for a view that binds its bytes to a scope straight from the address
     * (one segment made, not a slice and then its rebinding); checked to lie within the host copy's memory, as the
     * slice would be.
     */
    static long currentHostAddress(BufferCore root, Block device, long byteOffset, long byteSize) {
        Block copy = currentHostBlock(root, device);
        MemorySegment memory = hostSegment(copy);
        return memory.address() + Objects.checkFromIndexSize(copy.offset() + byteOffset, byteSize, memory.byteSize());
    }

    /** The block of the host copy as it should be read now: the memory itself, or the mirror after pulling newer device data (made on first need). */
    private static Block currentHostBlock(BufferCore root, Block device) {
        if (root.isHostAccessible()) {
            return device;
        }
        if (root.mirror == null) {
            root.mirror = root.host.allocateMirror(root.byteSize);
        }
        if (root.state.deviceIsNewer()) {
            toHost(root, device, device.offset(), rootBytes(root, root.mirror));
            root.host.count(Transfer.DEVICE_TO_HOST, root.location, root.byteSize);
            root.state = BufferState.SYNCHRONIZED;
        }
        return root.mirror;
    }

    /** Writes {@code source} at {@code byteOffset} of {@code buffer} (the root or a slice of it) into its newer copy. */
    static void write(BufferCore buffer, BufferCore root, Block device, long byteOffset, MemorySegment source) {
        long length = source.byteSize();
        long at = buffer.byteOffset() + byteOffset;
        if (root.isHostAccessible()) {
            MemorySegment.copy(source, 0, rootBytes(root, device), at, length);
            root.state = BufferState.SYNCHRONIZED;
        } else if (root.state.hostIsNewer()) {
            MemorySegment.copy(source, 0, rootBytes(root, Objects.requireNonNull(root.mirror)), at, length);
        } else {
            toDevice(root, source, device, device.offset() + at);
            root.state = deviceWritten(root);
        }
        root.host.count(Transfer.HOST_TO_DEVICE, root.location, length);
    }

    /** Reads into {@code destination} from {@code byteOffset} of {@code buffer}, from its newer copy. */
    static void read(BufferCore buffer, BufferCore root, Block device, long byteOffset, MemorySegment destination) {
        long length = destination.byteSize();
        long at = buffer.byteOffset() + byteOffset;
        if (root.isHostAccessible()) {
            MemorySegment.copy(rootBytes(root, device), at, destination, 0, length);
        } else if (!readsFromDevice(root)) {
            MemorySegment.copy(rootBytes(root, Objects.requireNonNull(root.mirror)), at, destination, 0, length);
        } else {
            toHost(root, device, device.offset() + at, destination);
        }
        root.host.count(Transfer.DEVICE_TO_HOST, root.location, length);
    }

    /**
     * The backend's blocking copy of {@code source} to {@code device} at {@code offset}; one that timed out once it had
     * queued work leaves that work in flight on the memory ({@link BufferCore#recordLeftQueued}), which it may still use.
     */
    private static void toDevice(BufferCore root, MemorySegment source, Block device, long offset) {
        try {
            root.host.backend().copyToDevice(source, device.segment(), offset, source.byteSize());
        } catch (RuntimeException | Error e) {
            root.recordLeftQueued(e, source);
            throw e;
        }
    }

    /** As {@link #toDevice}, from {@code device} at {@code offset} into {@code destination}. */
    private static void toHost(BufferCore root, Block device, long offset, MemorySegment destination) {
        try {
            root.host.backend().copyToHost(device.segment(), offset, destination, destination.byteSize());
        } catch (RuntimeException | Error e) {
            root.recordLeftQueued(e, destination);
            throw e;
        }
    }

    /** The whole root's bytes in a host-accessible block. */
    static MemorySegment rootBytes(BufferCore root, Block block) {
        return hostSegment(block).asSlice(block.offset(), root.byteSize);
    }

    private static MemorySegment hostSegment(Block block) {
        NativeAllocation segment = block.segment();
        MemorySegment host = segment.hostSegment();
        if (host == null) {
            throw new IllegalStateException("memory at " + segment.location() + " is not host-accessible on this backend");
        }
        return host;
    }
}
