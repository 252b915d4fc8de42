package dev.compute.memory.lifetime;

import dev.compute.memory.AccessMode;
import dev.compute.memory.lifetime.BufferHost.Transfer;
import dev.compute.memory.resource.Block;
import dev.compute.memory.spi.CallerFutures;
import dev.compute.memory.spi.Region;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.CompletableFuture;

/**
 * Copies between a buffer and the caller's memory or another buffer: each through the buffer's door
 * ({@link BufferCore#call}), once no device work is in flight on it, into or out of whichever copy is newer
 * ({@link Coherence}). Buffer to buffer, both are held until the copy is done, whoever closes them meanwhile.
 */
public final class BufferCopies {

    private BufferCopies() {}

    /** Writes all of {@code source} at {@code byteOffset} of {@code buffer}. */
    public static void write(BufferCore buffer, long byteOffset, MemorySegment source) {
        buffer.requireWritable("a copy into it", "");
        buffer.call(source, null, () -> {
            buffer.checkRange(byteOffset, source.byteSize());
            return buffer.whenIdle(root -> {
                Coherence.write(buffer, root, buffer.openBlock(), byteOffset, source);
                return null;
            });
        });
    }

    /** Fills {@code destination} from {@code byteOffset} of {@code buffer}. */
    public static void read(BufferCore buffer, long byteOffset, MemorySegment destination) {
        buffer.call(destination, null, () -> {
            buffer.checkRange(byteOffset, destination.byteSize());
            return buffer.whenIdle(root -> {
                Coherence.read(buffer, root, buffer.openBlock(), byteOffset, destination);
                return null;
            });
        });
    }

    /** Writes {@code source} at {@code byteOffset} without waiting for the device; the future says when it is done. */
    public static CompletableFuture<Void> writeAsync(BufferCore buffer, long byteOffset, MemorySegment source) {
        buffer.requireWritable("copyFromAsync", "");
        return buffer.call(source, null, () -> {
            buffer.checkRange(byteOffset, source.byteSize());
            return buffer.whenIdle(root -> {
                Block device = buffer.openBlock();
                if (root.isHostAccessible() || root.state.hostIsNewer()) {
                    Coherence.write(buffer, root, device, byteOffset, source);
                    return CompletableFuture.completedFuture(null); // the caller's own: what it does to it touches no other call
                }
                CompletableFuture<Void> done = root.host.backend().copyToDeviceAsync(source, device.segment(),
                        device.offset() + buffer.byteOffset() + byteOffset, source.byteSize());
                root.host.count(Transfer.HOST_TO_DEVICE, root.location, source.byteSize());
                root.state = Coherence.deviceWritten(root);
                root.recordInFlight(done);
                return CallerFutures.forCaller(done);
            });
        });
    }

    /** Reads into {@code destination} from {@code byteOffset} without waiting for the device. */
    public static CompletableFuture<Void> readAsync(BufferCore buffer, long byteOffset, MemorySegment destination) {
        return buffer.call(destination, null, () -> {
            buffer.checkRange(byteOffset, destination.byteSize());
            return buffer.whenIdle(root -> {
                Block device = buffer.openBlock();
                if (root.isHostAccessible() || !Coherence.readsFromDevice(root)) {
                    Coherence.read(buffer, root, device, byteOffset, destination);
                    return CompletableFuture.completedFuture(null);
                }
                CompletableFuture<Void> done = root.host.backend().copyToHostAsync(device.segment(),
                        device.offset() + buffer.byteOffset() + byteOffset, destination, destination.byteSize());
                root.host.count(Transfer.DEVICE_TO_HOST, root.location, destination.byteSize());
                root.recordInFlight(done);
                return CallerFutures.forCaller(done);
            });
        });
    }

    /**
     * Copies {@code bytes} from {@code source} at {@code sourceOffset} to {@code target} at {@code targetOffset}: by
     * the host where either side is host memory, device to device where both copies live on the device.
     */
    public static void copy(BufferCore source, long sourceOffset, BufferCore target, long targetOffset, long bytes) {
        if (!source.belongsTo(target.host)) {
            throw new IllegalArgumentException("the source buffer belongs to another UnifiedMemoryManager; copy through host memory instead");
        }
        target.requireWritable("copyFrom", "");
        source.checkRange(sourceOffset, bytes);
        target.checkRange(targetOffset, bytes);
        target.call(null, source, () -> {
            if (source.isHostAccessible()) {
                MemorySegment from = Holds.hostBytes(source);
                try {
                    write(target, targetOffset, from.asSlice(sourceOffset, bytes));
                } finally {
                    Holds.release(source, null, BufferCore.DONE);
                }
            } else if (target.isHostAccessible()) {
                MemorySegment to = Holds.hostBytes(target);
                try {
                    read(source, sourceOffset, to.asSlice(targetOffset, bytes));
                } finally {
                    Holds.release(target, AccessMode.WRITE, BufferCore.DONE);
                }
            } else {
                Region from = Holds.deviceRegion(source, AccessMode.READ);
                try {
                    Region to = Holds.deviceRegion(target, AccessMode.WRITE);
                    try {
                        target.host.backend().copyWithinDevice(from.allocation(), from.offset() + sourceOffset,
                                to.allocation(), to.offset() + targetOffset, bytes);
                        target.host.count(Transfer.DEVICE_TO_DEVICE, target.location, bytes);
                    } finally {
                        Holds.release(target, AccessMode.WRITE, BufferCore.DONE);
                    }
                } finally {
                    Holds.release(source, null, BufferCore.DONE);
                }
            }
            return null;
        });
    }
}
