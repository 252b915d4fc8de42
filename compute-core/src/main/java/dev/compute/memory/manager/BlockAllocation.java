package dev.compute.memory.manager;

import dev.compute.memory.AllocationAboveLimitException;
import dev.compute.memory.DataType;
import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.MemoryEventListener;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.OutOfMemoryReason;
import dev.compute.memory.internal.UserCode;
import dev.compute.memory.resource.Block;
import dev.compute.memory.resource.NothingInFlight;
import java.util.ArrayList;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * Blocks from a location's chain, as buffers may use them: one, or a batch all or none (placed together where the
 * pool can, else one by one). Where the application's adaptors are in the chain each block is checked to be at least
 * as large as asked and within its segment, since a buffer on a smaller one would reach memory that is not its own.
 * An out-of-memory is told to listeners, except a waiting request's retries. Blocks a failed batch gives back wake the
 * requests waiting at its location, as a close does.
 */
public final class BlockAllocation {

    /** Whether listeners hear of an out-of-memory: not of a waiting request's retries, only of its giving up. */
    public enum Failure { REPORT, SILENT }

    private final MemoryEventListener events;
    private final AllocationWaiters<?> waiters;

    public BlockAllocation(MemoryEventListener events, AllocationWaiters<?> waiters) {
        this.events = events;
        this.waiters = waiters;
    }

    /**
     * The bytes of {@code count} elements, refused unless positive (as a size in bytes for INT8, which the methods taking
     * bytes allocate: "element count" would mislead their callers); an overflow says so.
     */
    public static long elementBytes(DataType type, long count) {
        if (count <= 0) {
            throw new IllegalArgumentException(type == DataType.INT8 ? "allocation size must be positive: " + count + " bytes"
                    : "element count must be positive: " + count + " " + type + " elements");
        }
        return type.bytesFor(count);
    }

    public Block block(LocationChain chain, long bytes, Failure failure) {
        try {
            Block block = chain.entry.allocate(bytes);
            return chain.checksBlocks() ? checked(chain, block, bytes) : block;
        } catch (DeviceOutOfMemoryException e) {
            if (failure == Failure.REPORT) {
                events.allocationFailed(chain.location(), bytes, e.reason());
            }
            throw e;
        }
    }

    /** The bytes of each buffer of a batch, refused before anything is taken: a count that is not positive, or sizes whose sum overflows. */
    public static long[] batchBytes(DataType type, long[] counts, MemoryLocation location) {
        if (counts.length == 0) {
            throw new IllegalArgumentException("a batch needs at least one buffer");
        }
        long[] bytes = new long[counts.length];
        long total = 0;
        for (int i = 0; i < counts.length; i++) {
            if (counts[i] <= 0) {
                throw new IllegalArgumentException((type == DataType.INT8 ? "allocation size must be positive: sizes[" : "element count must be positive: counts[")
                        + i + "] is " + counts[i]);
            }
            bytes[i] = type.bytesFor(counts[i]);
            total += bytes[i];
            if (total < 0) {
                throw new AllocationAboveLimitException(location, Long.MAX_VALUE, OutOfMemoryReason.POOL_LIMIT, "a batch whose first "
                        + (i + 1) + " of " + counts.length + " buffers of " + type + " already total more than " + Long.MAX_VALUE
                        + " bytes is above every limit: nothing was allocated");
            }
        }
        return bytes;
    }

    /**
     * All or none: together where the chain's pool places them so, else one by one, giving back those taken when one
     * fails. A batch that together passes the location's cap fails at once ({@link #refuseAboveCap}).
     */
    public List<Block> batch(LocationChain chain, long[] bytes) {
        UserCode.refuseInListener(chain.location()); // a single allocation is refused past the pool's cache, where it takes a lock
        refuseAboveCap(chain, bytes);
        List<Block> blocks = chain.entry.allocateAdjacent(bytes);
        if (blocks != null && chain.checksBlocks()) {
            blocks = checkedBatch(chain, blocks, bytes);
        }
        return blocks != null ? blocks : each(chain, bytes);
    }

    /**
     * Refuses, before anything is taken, a batch whose buffers together pass the location's cap: no memory freed could
     * make room for it, so the pool's cache is kept and neither a compaction nor the out-of-memory handlers run for it,
     * as for a single request above the cap; so for one within the cap that the pool's whole pieces could never hold. A
     * buffer above a limit by itself is left to its own refusal, which names it.
     */
    private void refuseAboveCap(LocationChain chain, long[] bytes) {
        long total = 0;
        for (long size : bytes) {
            if (size > chain.largestPossibleBytes()) {
                return;
            }
            total += size; // batchBytes refused sums that overflow
        }
        // the pool takes memory in whole pieces, so a batch within the cap in bytes may still never fit in them
        long taken = total > chain.backend.limitBytes() ? total : chain.leastTakenFor(bytes, total);
        if (taken > chain.backend.limitBytes()) {
            AllocationAboveLimitException e = chain.backend.limits().batchAboveLimit(bytes.length, total, taken, chain.pieces());
            events.allocationFailed(chain.location(), total, e.reason());
            throw e;
        }
    }

    private List<Block> each(LocationChain chain, long[] bytes) {
        List<Block> blocks = new ArrayList<>(bytes.length);
        try {
            for (long size : bytes) {
                blocks.add(block(chain, size, Failure.REPORT));
            }
            return blocks;
        } catch (DeviceOutOfMemoryException e) {
            Throwable freeing = giveBack(chain, blocks);
            int failed = blocks.size();
            String message = "buffer " + (failed + 1) + " of a batch of " + bytes.length + " (" + bytes[failed] + " bytes) could not be"
                    + " allocated, so the " + failed + " allocated before it were given back: " + e.getMessage();
            DeviceOutOfMemoryException batchFailure = e instanceof AllocationAboveLimitException
                    ? new AllocationAboveLimitException(chain.location(), bytes[failed], e.reason(), message)
                    : new DeviceOutOfMemoryException(chain.location(), bytes[failed], e.reason(), message);
            batchFailure.initCause(e);
            if (freeing != null) {
                batchFailure.addSuppressed(freeing);
            }
            throw batchFailure;
        } catch (Throwable e) {
            // any Throwable: an out-of-memory handler or adaptor in Kotlin, say, throws checked exceptions too
            Throwable freeing = giveBack(chain, blocks);
            if (freeing != null) {
                UserCode.suppress(e, freeing);
            }
            throw e;
        }
    }

    /**
     * Gives every block back, whatever one's free throws (an application's adaptor may throw anything): the first
     * failure, with the others added to it, or null. A request waiting there is tried again: while the batch held these
     * blocks, a close may have tried it in vain, and no later close may come to wake it.
     */
    private @Nullable Throwable giveBack(LocationChain chain, List<Block> blocks) {
        Throwable failure = null;
        for (Block block : blocks) {
            failure = chain.deallocate(block, NothingInFlight.FUTURE, failure);
        }
        if (!blocks.isEmpty()) {
            waiters.released(chain.location(), NothingInFlight.FUTURE);
        }
        return failure;
    }

    /**
     * A block from a chain with the application's adaptors, as a buffer may use it: at least {@code bytes} long and
     * within its segment. Otherwise it goes back and the allocation fails, rather than let the buffer reach memory
     * that is not its own.
     */
    private static Block checked(LocationChain chain, Block block, long bytes) {
        long segmentBytes = block.segment().sizeBytes();
        if (block.size() >= bytes && block.offset() >= 0 && block.offset() <= segmentBytes - block.size()) {
            return block;
        }
        IllegalStateException wrong = new IllegalStateException("a resource adaptor of the " + chain.location() + " chain handed out a block of "
                + block.size() + " bytes at offset " + block.offset() + " of a " + segmentBytes + "-byte segment for a request of "
                + bytes + " bytes: a buffer on it would reach memory that is not its own");
        Throwable freeing = chain.deallocate(block, NothingInFlight.FUTURE, null);
        if (freeing != null) {
            wrong.addSuppressed(freeing);
        }
        throw wrong;
    }

    /** A batch placed together by a chain with the application's adaptors, each block {@link #checked}; all go back if one is wrong. */
    private List<Block> checkedBatch(LocationChain chain, List<Block> blocks, long[] bytes) {
        if (blocks.size() != bytes.length) {
            IllegalStateException wrong = new IllegalStateException("a resource adaptor of the " + chain.location() + " chain placed "
                    + blocks.size() + " blocks for a batch of " + bytes.length);
            Throwable freeing = giveBack(chain, blocks);
            if (freeing != null) {
                wrong.addSuppressed(freeing);
            }
            throw wrong;
        }
        for (int i = 0; i < blocks.size(); i++) {
            try {
                checked(chain, blocks.get(i), bytes[i]);
            } catch (IllegalStateException e) {
                List<Block> others = new ArrayList<>(blocks);
                others.remove(i);
                Throwable freeing = giveBack(chain, others);
                if (freeing != null) {
                    e.addSuppressed(freeing);
                }
                throw e;
            }
        }
        return blocks;
    }
}
