package dev.compute.memory.lifetime;

import dev.compute.memory.MemoryLocation;
import dev.compute.memory.resource.Block;
import dev.compute.memory.spi.ComputeBackend;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import org.jspecify.annotations.Nullable;

/**
 * What a buffer needs of the manager that made it, and all it knows of it: the door its calls pass (so that closing
 * the manager never frees memory under one), the backend, where its blocks go back, a host mirror's memory, the
 * registry of open scopes and the figures it counts into.
 */
public interface BufferHost {

    /** Which way a copy moved bytes, for the manager's figures. */
    enum Transfer { HOST_TO_DEVICE, DEVICE_TO_HOST, DEVICE_TO_DEVICE }

    /**
     * Counts a call on {@code buffer} in (the manager's close waits for it before freeing anything), after ending the
     * scopes other threads handed to this one; throws the buffer's {@link IllegalStateException} once the manager is
     * closed. Give the result to {@link #exit}.
     */
    int enter(BufferCore buffer);

    /** Counts in the end of an access, which must finish before the manager frees anything; works on a closed manager. */
    int enterToEnd();

    /** Counts a call out. */
    void exit(int call);

    boolean isClosed();

    ComputeBackend backend();

    /** True where host and device share the memory of {@code location}: one copy, syncs cost nothing. */
    boolean hostAccessible(MemoryLocation location);

    void count(Transfer transfer, MemoryLocation location, long bytes);

    ScopeRegistry scopes();

    /** The longest a call waits for device work it depends on. */
    Duration deviceWaitTimeout();

    /** Waits, bounded, for the device to finish everything: for an access whose backend could not say what it queued. */
    void awaitDeviceIdle();

    /** Memory for a discrete buffer's host copy, from the mirror location's chain. */
    Block allocateMirror(long bytes);

    /**
     * {@code buffer}, a root, was closed, but views, accesses or ops still hold its {@code block} (and its host
     * {@code mirror}, if it has one): it is no buffer of the figures any more, and its memory is held until
     * {@link #release} gives it back. Called under the buffer's monitor, so that the release comes after.
     */
    void held(BufferCore buffer, Block block, @Nullable Block mirror);

    /**
     * A closed buffer's blocks go back: to their chains, or a mapped file to be unmapped, once {@code inFlight} is done;
     * {@code budgetCount} is what the buffer's budget counts it by (null for a buffer of no budget), to be told then.
     */
    void release(MemoryLocation location, Block block, @Nullable Block mirror, CompletableFuture<?> inFlight, @Nullable Object budgetCount);

    /**
     * {@code buffer}, held as {@link #held} says, gives its {@code block} back now ({@link #release} without its mirror):
     * only views of its host {@code mirror} hold it, and they never reach the block. The mirror stays held until
     * {@link #releaseMirror}. Called under the buffer's monitor, before that release.
     */
    void heldMirrorOnly(BufferCore buffer, Block block, Block mirror);

    /** The mirror {@link #heldMirrorOnly} kept goes back, once {@code inFlight} is done. */
    void releaseMirror(Block mirror, CompletableFuture<?> inFlight);
}
