package dev.compute.memory.lifetime;

import dev.compute.memory.AccessMode;
import dev.compute.memory.lifetime.BufferHost.Transfer;
import dev.compute.memory.internal.StagingMemory;
import dev.compute.memory.resource.Block;
import dev.compute.memory.spi.CallerFutures;
import dev.compute.memory.spi.FileMappings;
import dev.compute.memory.spi.Region;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.CompletableFuture;
import org.jspecify.annotations.Nullable;

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
        CallerMemory memory = CallerMemory.of(source);
        buffer.call(source, null, () -> {
            buffer.checkRange(byteOffset, source.byteSize());
            return buffer.whenIdle(root -> {
                Block device = buffer.openBlock();
                if (memory == CallerMemory.ANY_MOMENT && !root.isHostAccessible()) {
                    writeThroughArray(buffer, root, device, byteOffset, source);
                } else {
                    Coherence.write(buffer, root, device, byteOffset, source);
                }
                return null;
            });
        });
    }

    /** Fills {@code destination} from {@code byteOffset} of {@code buffer}. */
    public static void read(BufferCore buffer, long byteOffset, MemorySegment destination) {
        CallerMemory memory = CallerMemory.of(destination);
        requireWritable(destination);
        buffer.call(destination, null, () -> {
            buffer.checkRange(byteOffset, destination.byteSize());
            return buffer.whenIdle(root -> {
                Block device = buffer.openBlock();
                if (memory == CallerMemory.ANY_MOMENT && !root.isHostAccessible()) {
                    readThroughArray(buffer, root, device, byteOffset, destination);
                } else {
                    Coherence.read(buffer, root, device, byteOffset, destination);
                }
                return null;
            });
        });
    }

    /**
     * Writes {@code source} at {@code byteOffset} without waiting for the device; the future says when it is done. The
     * driver reads the caller's memory itself only where nothing can free it meanwhile ({@link CallerMemory}): else it
     * reads a copy made now, which the copy's end frees.
     */
    public static CompletableFuture<Void> writeAsync(BufferCore buffer, long byteOffset, MemorySegment source) {
        buffer.requireWritable("copyFromAsync", "");
        CallerMemory memory = CallerMemory.of(source);
        return buffer.call(source, null, () -> {
            buffer.checkRange(byteOffset, source.byteSize());
            return buffer.whenIdle(root -> {
                Block device = buffer.openBlock();
                if (root.isHostAccessible() || root.state.hostIsNewer()) {
                    Coherence.write(buffer, root, device, byteOffset, source);
                    return CompletableFuture.completedFuture(null); // the caller's own: what it does to it touches no other call
                }
                long bytes = source.byteSize();
                MemorySegment staging = memory.freeableBeforeAQueuedCopy() ? StagingMemory.allocate(bytes) : null;
                if (staging != null) {
                    try {
                        MemorySegment.copy(source, 0, staging, 0, bytes);
                        surfaceFaultsOf(source); // this copy's fault, not a later call's
                    } catch (RuntimeException | Error e) {
                        StagingMemory.free(staging);
                        throw e;
                    }
                }
                // a backend that fails may have queued the command first (a flush that fails after it): its staging is
                // then kept, never freed under it
                CompletableFuture<Void> done;
                try {
                    done = root.host.backend().copyToDeviceAsync(staging != null ? staging : source, device.segment(),
                            device.offset() + buffer.byteOffset() + byteOffset, bytes);
                } catch (RuntimeException | Error e) {
                    root.recordLeftQueued(e); // chunks of a staged copy queued before a wait timed out may still write it
                    throw e;
                }
                CompletableFuture<Void> caller = staging == null ? CallerFutures.forCaller(done)
                        : CallerFutures.forCaller(done, failure -> StagingMemory.free(staging)); // the device's read is over, whatever the caller does
                root.host.count(Transfer.HOST_TO_DEVICE, root.location, bytes);
                root.state = Coherence.deviceWritten(root);
                root.recordInFlight(done);
                return caller;
            });
        });
    }

    /**
     * Reads into {@code destination} from {@code byteOffset} without waiting for the device. The driver writes the
     * caller's memory itself only where nothing can free it meanwhile ({@link CallerMemory}); into a confined arena of
     * the caller's, which no other thread may write, the read is done before this returns; into any other, the driver
     * writes memory of the copy's own, copied out by Java once it has landed (failing the future, not the process,
     * where the caller closed the arena meanwhile).
     */
    public static CompletableFuture<Void> readAsync(BufferCore buffer, long byteOffset, MemorySegment destination) {
        CallerMemory memory = CallerMemory.of(destination);
        requireWritable(destination);
        return buffer.call(destination, null, () -> {
            buffer.checkRange(byteOffset, destination.byteSize());
            return buffer.whenIdle(root -> {
                Block device = buffer.openBlock();
                if (root.isHostAccessible() || !Coherence.readsFromDevice(root) || memory == CallerMemory.THIS_CALL) {
                    Coherence.read(buffer, root, device, byteOffset, destination);
                    return CompletableFuture.completedFuture(null);
                }
                long bytes = destination.byteSize();
                long from = device.offset() + buffer.byteOffset() + byteOffset;
                CompletableFuture<Void> done;
                CompletableFuture<Void> caller;
                try {
                    if (memory == CallerMemory.ANY_MOMENT) {
                        MemorySegment landing = StagingMemory.allocate(bytes);
                        // as in writeAsync: a backend that fails keeps the landing memory, which a queued command may write
                        done = root.host.backend().copyToHostAsync(device.segment(), from, landing, bytes);
                        caller = CallerFutures.forCaller(done, failure -> deliver(failure, landing, destination));
                    } else {
                        done = root.host.backend().copyToHostAsync(device.segment(), from, destination, bytes);
                        caller = CallerFutures.forCaller(done);
                    }
                } catch (RuntimeException | Error e) {
                    root.recordLeftQueued(e);
                    throw e;
                }
                root.host.count(Transfer.DEVICE_TO_HOST, root.location, bytes);
                root.recordInFlight(done);
                return caller;
            });
        });
    }

    /**
     * Refuses a read-only destination before the device is read: memory of the copy's own would take the bytes (and
     * the figures count them) only for the copy out to fail, and a queued read's future would fail instead of the call.
     */
    private static void requireWritable(MemorySegment destination) {
        if (destination.isReadOnly()) {
            throw new IllegalArgumentException("cannot copy into a read-only segment: " + destination);
        }
    }

    /**
     * Once a read that lands in {@code landing} has ended ({@code failure} null where it ended well): copies it out to
     * {@code destination}, which fails, harmlessly, into an arena closed meanwhile, and frees the landing memory, never
     * earlier, whatever the caller does to its future.
     */
    private static void deliver(@Nullable Throwable failure, MemorySegment landing, MemorySegment destination) {
        try {
            if (failure == null) {
                MemorySegment.copy(landing, 0, destination, 0, landing.byteSize());
                surfaceFaultsOf(destination);
            }
        } finally {
            StagingMemory.free(landing);
        }
    }

    /**
     * Where {@code segment} lies over a mapped file, has the JVM throw now a fault that Java's copy met there (compiled
     * code gets it late, at the thread's next check), so that it is this copy's failure and no later call's.
     */
    private static void surfaceFaultsOf(MemorySegment segment) {
        if (FileMappings.isOverMapping(segment)) {
            FileMappings.surfaceFaults();
        }
    }

    /** The size of the Java array a blocking copy goes through where the caller's arena could close under a driver. */
    private static final int ARRAY_CHUNK_BYTES = 4 << 20;

    /** {@link Coherence#write} from memory another thread may free: by Java into an array, the driver reading that. */
    private static void writeThroughArray(BufferCore buffer, BufferCore root, Block device, long byteOffset, MemorySegment source) {
        long bytes = source.byteSize();
        MemorySegment array = MemorySegment.ofArray(new byte[(int) Math.min(bytes, ARRAY_CHUNK_BYTES)]);
        for (long done = 0; done < bytes; done += array.byteSize()) {
            MemorySegment chunk = array.asSlice(0, Math.min(array.byteSize(), bytes - done));
            MemorySegment.copy(source, done, chunk, 0, chunk.byteSize());
            surfaceFaultsOf(source);
            Coherence.write(buffer, root, device, byteOffset + done, chunk);
        }
    }

    /** {@link Coherence#read} into memory another thread may free: the driver writing an array, Java copying it out. */
    private static void readThroughArray(BufferCore buffer, BufferCore root, Block device, long byteOffset, MemorySegment destination) {
        long bytes = destination.byteSize();
        MemorySegment array = MemorySegment.ofArray(new byte[(int) Math.min(bytes, ARRAY_CHUNK_BYTES)]);
        for (long done = 0; done < bytes; done += array.byteSize()) {
            MemorySegment chunk = array.asSlice(0, Math.min(array.byteSize(), bytes - done));
            Coherence.read(buffer, root, device, byteOffset + done, chunk);
            MemorySegment.copy(chunk, 0, destination, done, chunk.byteSize());
            surfaceFaultsOf(destination);
        }
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
            // a copy that timed out once queued may still use both buffers' memory: each hold ends with that work
            CompletableFuture<?> queued = BufferCore.DONE;
            if (source.isHostAccessible()) {
                MemorySegment from = Holds.hostBytes(source);
                try {
                    write(target, targetOffset, from.asSlice(sourceOffset, bytes));
                } catch (RuntimeException | Error e) {
                    queued = Holds.leftQueued(e);
                    throw e;
                } finally {
                    Holds.release(source, null, queued);
                }
            } else if (target.isHostAccessible()) {
                MemorySegment to = Holds.hostBytes(target);
                try {
                    read(source, sourceOffset, to.asSlice(targetOffset, bytes));
                } catch (RuntimeException | Error e) {
                    queued = Holds.leftQueued(e);
                    throw e;
                } finally {
                    Holds.release(target, AccessMode.WRITE, queued);
                }
            } else {
                Region from = Holds.deviceRegion(source, AccessMode.READ);
                try {
                    Region to = Holds.deviceRegion(target, AccessMode.WRITE);
                    try {
                        target.host.backend().copyWithinDevice(from.allocation(), from.offset() + sourceOffset,
                                to.allocation(), to.offset() + targetOffset, bytes);
                        target.host.count(Transfer.DEVICE_TO_DEVICE, target.location, bytes);
                    } catch (RuntimeException | Error e) {
                        queued = Holds.leftQueued(e);
                        throw e;
                    } finally {
                        Holds.release(target, AccessMode.WRITE, queued);
                    }
                } finally {
                    Holds.release(source, null, queued);
                }
            }
            return null;
        });
    }
}
