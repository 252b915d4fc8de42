package dev.compute.memory.lifetime;

import dev.compute.memory.AccessMode;
import dev.compute.memory.resource.Block;
import dev.compute.memory.spi.QueuedWorkTimeoutException;
import dev.compute.memory.spi.Region;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.CompletableFuture;
import org.jspecify.annotations.Nullable;

/**
 * What an op or a copy holds while it runs: the memory where it runs, synced there first, counted as a hold of the
 * root, so that a close meanwhile makes the buffer unusable at once but keeps its memory until the hold ends; ended
 * with the device work the op queued, which the buffer then keeps as in flight ({@link WorkInFlight}).
 */
public final class Holds {

    private Holds() {
    }

    /**
     * Holds {@code buffer}'s memory for a kernel and returns where it is: the device copy, synced first if the host copy
     * is newer, after device work queued by others. End it with {@link #release} and the kernel's future.
     */
    public static Region deviceRegion(BufferCore buffer, AccessMode mode) {
        if (mode.writes()) {
            buffer.requireWritable("an op that writes its argument", "");
        }
        // work queued on another stream or queue must not be overtaken: ordered on the device, or waited for; by a
        // method that captures nothing, as every op passes here
        return WorkInFlight.after(buffer, WorkInFlight.UNORDERED, mode, Holds::deviceRegionWhenOrdered);
    }

    private static Region deviceRegionWhenOrdered(BufferCore buffer, BufferCore root, AccessMode mode) {
        Block device = buffer.openBlock();
        if (mode.writes()) {
            root.refuseDeviceWriteUnderHostWrite(buffer, "an op or copy that writes");
        }
        if (root.state.hostIsNewer()) {
            Coherence.copyMirrorToDevice(root, device);
        }
        if (mode.writes()) {
            root.state = Coherence.deviceWritten(root);
        }
        root.hold();
        return new Region(device.segment(), device.offset() + buffer.byteOffset(), buffer.elementCount(), buffer.dataType);
    }

    /** The host bytes of {@code buffer}, host-accessible memory, held until {@link #release}. */
    static MemorySegment hostBytes(BufferCore buffer) {
        return buffer.whenIdle(root -> {
            Block device = buffer.openBlock();
            root.hold();
            return Coherence.rootBytes(root, device).asSlice(buffer.byteOffset(), buffer.byteSize);
        });
    }

    /**
     * The device work a failed copy left queued ({@link QueuedWorkTimeoutException}), which the holds it took end with;
     * {@link BufferCore#DONE} where it left none.
     */
    static CompletableFuture<?> leftQueued(Throwable failure) {
        CompletableFuture<?> queued = QueuedWorkTimeoutException.leftQueuedBy(failure);
        return queued != null ? queued : BufferCore.DONE;
    }

    /**
     * Ends a hold of {@code buffer}: records {@code work} as device work in flight on the memory and, when {@code wrote}
     * is a writing mode, marks the device copy newer; gives the memory back if the buffer was closed meanwhile.
     */
    public static void release(BufferCore buffer, @Nullable AccessMode wrote, CompletableFuture<?> work) {
        BufferCore root = buffer.root();
        synchronized (root) {
            root.recordInFlight(work);
            if (wrote != null && wrote.writes()) {
                root.state = Coherence.deviceWritten(root);
            }
            root.unhold();
        }
        try {
            root.releaseIfUnused();
        } catch (RuntimeException | Error e) {
            // another thread closed the buffer during the op: a free refused on that close's behalf is no failure of the op
            ScopeRegistry.releaseFailed(e);
        }
    }
}
