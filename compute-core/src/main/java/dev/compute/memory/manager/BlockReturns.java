package dev.compute.memory.manager;

import dev.compute.memory.MemoryLocation;
import dev.compute.memory.resource.Block;
import dev.compute.memory.resource.DeviceWork;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;

/**
 * Where a closed buffer's blocks go: to its location's chain (once its budget and compaction have let go of it), its
 * host mirror to the mirror location's chain, a mapped file to be unmapped; and the requests waiting at those
 * locations hear of it. Device work the blocks still wait for is remembered, so that the manager's close frees nothing
 * before it is done.
 */
public final class BlockReturns {

    private final LocationChains chains;
    private final CallGate gate;
    private final Compactor compactor;
    private final MappedFiles mappedFiles;
    private final AllocationWaiters<?> waiters;
    /**
     * Tells a budget its buffer's memory went back (once the pool has it, or, held by device work, once the work ended,
     * before the pool's next allocation makes it free) or its file was unmapped, by what the budget counts the buffer by.
     */
    private final Consumer<Object> budgetRelease;
    /** Device work released blocks still wait for; the manager's close frees nothing before it is done (or keeps everything). */
    private final Set<CompletableFuture<?>> releasedInFlight = ConcurrentHashMap.newKeySet();
    private volatile boolean poolsFreed;

    public BlockReturns(LocationChains chains, CallGate gate, Compactor compactor, MappedFiles mappedFiles, AllocationWaiters<?> waiters,
                 Consumer<Object> budgetRelease) {
        this.chains = chains;
        this.gate = gate;
        this.compactor = compactor;
        this.mappedFiles = mappedFiles;
        this.waiters = waiters;
        this.budgetRelease = budgetRelease;
    }

    /**
     * Gives a closed buffer's blocks back. Views ending while the manager closes still give theirs back (so the close
     * report does not count them as open); once the pools are freed there is nothing to give back to. An application's
     * adaptor may throw anything from its free: the mirror still goes back and the waiters still hear of it, and the
     * caller gets the adaptor's exception after that. {@code budgetCount}: what the buffer's budget counts it by, or
     * null.
     */
    public void release(MemoryLocation location, Block block, @Nullable Block mirror, CompletableFuture<?> inFlight,
                        @Nullable Object budgetCount) {
        int stripe = gate.enterAlways();
        try {
            if (poolsFreed) {
                return;
            }
            keepUntilDone(inFlight);
            Throwable failure = null;
            if (block instanceof MappedFile mapping) {
                mappedFiles.release(mapping, inFlight);
                if (budgetCount != null) {
                    budgetRelease.accept(budgetCount);
                }
            } else {
                LocationChain chain = chains.of(location);
                compactor.forget(chain, block);
                CompletableFuture<?> reusable = inFlight;
                boolean workPending = !inFlight.isDone(); // read once: the budget lets go on one path only
                if (workPending) {
                    // until the device work on it is done the memory is neither free nor a buffer's: the budget counts
                    // it, and the chain says it is held, until it may be lent again
                    chain.heldByDeviceWork(block, +1);
                    reusable = inFlight.whenComplete((result, workFailed) -> {
                        chain.heldByDeviceWork(block, -1);
                        if (budgetCount != null) {
                            budgetRelease.accept(budgetCount);
                        }
                    });
                }
                try {
                    failure = chain.deallocate(block, reusable, null);
                } finally {
                    if (!workPending && budgetCount != null) {
                        // the common free: the pool has the memory back before the budget lets its tenant count it
                        // again, so that no tenant is lent more than its books say, out of what another reserved
                        budgetRelease.accept(budgetCount);
                    }
                }
                waiters.released(location, reusable);
            }
            if (mirror != null) {
                failure = returnMirror(mirror, inFlight, failure);
            }
            rethrow(failure);
        } finally {
            gate.exitQuietly(stripe);
        }
    }

    /**
     * Gives back the host mirror of a closed buffer whose own block went back before it ({@link #release} with no
     * mirror): the views of the mirror held it longer. As {@link #release} does, once {@code inFlight} is done.
     */
    public void releaseMirror(Block mirror, CompletableFuture<?> inFlight) {
        int stripe = gate.enterAlways();
        try {
            if (poolsFreed) {
                return;
            }
            keepUntilDone(inFlight);
            rethrow(returnMirror(mirror, inFlight, null));
        } finally {
            gate.exitQuietly(stripe);
        }
    }

    /** Counts {@code inFlight} among the work that released blocks wait for ({@link #awaitReleasedWork}) until it is done. */
    private void keepUntilDone(CompletableFuture<?> inFlight) {
        if (!inFlight.isDone()) {
            releasedInFlight.add(inFlight);
            inFlight.whenComplete((result, failure) -> releasedInFlight.remove(inFlight));
        }
    }

    /** Gives a mirror back to its chain; returns {@code failure}, or if null, its free's failure. */
    private @Nullable Throwable returnMirror(Block mirror, CompletableFuture<?> inFlight, @Nullable Throwable failure) {
        MemoryLocation mirrorLocation = chains.mirrorLocation();
        LocationChain mirrorChain = chains.of(mirrorLocation);
        compactor.mirrorReturned(mirrorChain, mirror);
        CompletableFuture<?> mirrorReusable = inFlight;
        if (!inFlight.isDone()) { // the mirror waits for the device work too: held at its location, not cached
            mirrorChain.heldByDeviceWork(mirror, +1);
            mirrorReusable = inFlight.whenComplete((result, workFailed) -> mirrorChain.heldByDeviceWork(mirror, -1));
        }
        Throwable failed = mirrorChain.deallocate(mirror, mirrorReusable, failure);
        waiters.released(mirrorLocation, mirrorReusable);
        return failed;
    }

    private static void rethrow(@Nullable Throwable failure) {
        if (failure instanceof RuntimeException unchecked) {
            throw unchecked;
        }
        if (failure instanceof Error error) {
            throw error;
        }
        if (failure != null) { // a checked exception an adaptor threw past the compiler (sneaky, or from Kotlin)
            throw new IllegalStateException("the memory resource failed to free a block: " + failure, failure);
        }
    }

    /** Waits until the device work released blocks wait for is done, or {@code deadline} ({@link System#nanoTime()}). */
    boolean awaitReleasedWork(long deadline) {
        return DeviceWork.awaitAll(releasedInFlight, deadline);
    }

    /** The manager freed its pools: what closes from now on has nothing to give back to. */
    void poolsFreed() {
        poolsFreed = true;
    }
}
