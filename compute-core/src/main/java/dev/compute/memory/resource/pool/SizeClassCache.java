package dev.compute.memory.resource.pool;

import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;

/**
 * The fast path: per small size class, a short stack of blocks freed and not yet coalesced, so that a size
 * freed and asked for again (the common case: the same tensors every step) costs one uncontended lock of
 * its class and no tree walk. Threads that work on different sizes never meet here. Blocks wait in it as
 * {@link PoolBlock#CACHED}; the pool flushes them into their arena (coalescing them) before it asks the
 * backend for memory, and on trim and close, so the cache never makes the pool hold more memory.
 *
 * <p>A class's stack is created by the pool under its lock and published through a final field, so a
 * reader without the lock sees either null (and takes the slow path) or a whole stack.
 */
public final class SizeClassCache {

    /** Blocks kept per size class: enough for a step's repeats of one shape, few enough to stay small. */
    static final int DEPTH = 8;

    private static final class Stack {
        final PoolBlock[] blocks = new PoolBlock[DEPTH];
        int count;
        boolean closed;
    }

    private final @Nullable Stack[] stacks = new Stack[SizeClasses.SMALL_CLASSES];
    /** Set on every push, cleared by a flush: lets the pool skip a flush when nothing was cached. */
    private volatile boolean maybeHolding;

    /** A cached block of exactly {@code size} bytes made live for {@code requested} bytes, or null. */
    public @Nullable PoolBlock take(long size, long requested) {
        Stack stack = stacks[SizeClasses.smallClass(size)];
        if (stack == null) {
            return null;
        }
        synchronized (stack) {
            if (stack.count == 0 || stack.closed) {
                return null;
            }
            PoolBlock block = stack.blocks[--stack.count];
            stack.blocks[stack.count] = null;
            block.reuse(requested);
            return block;
        }
    }

    /** Caches a live small block; false when its class is full or not set up (the caller frees it the slow way). */
    public boolean offer(PoolBlock block) {
        Stack stack = stacks[SizeClasses.smallClass(block.size)];
        if (stack == null) {
            return false;
        }
        synchronized (stack) {
            if (stack.count == DEPTH || stack.closed || block.state != PoolBlock.LIVE) {
                return false;
            }
            block.state = PoolBlock.CACHED;
            stack.blocks[stack.count++] = block;
        }
        if (!maybeHolding) {
            maybeHolding = true;
        }
        return true;
    }

    /** Creates the stack of a block's size class, so its next free can take the fast path. Under the pool's lock. */
    public void prepare(long size) {
        int sizeClass = SizeClasses.smallClass(size);
        if (stacks[sizeClass] == null) {
            stacks[sizeClass] = new Stack();
        }
    }

    /** Hands every cached block to {@code sink} (the arena's release). Under the pool's lock. */
    public void flush(Consumer<PoolBlock> sink) {
        if (!maybeHolding) {
            return;
        }
        maybeHolding = false;
        drain(sink, false);
    }

    /** Flushes and refuses blocks from now on. Under the pool's lock. */
    public void close(Consumer<PoolBlock> sink) {
        drain(sink, true);
    }

    private void drain(Consumer<PoolBlock> sink, boolean close) {
        for (Stack stack : stacks) {
            if (stack == null) {
                continue;
            }
            synchronized (stack) {
                for (int i = 0; i < stack.count; i++) {
                    sink.accept(stack.blocks[i]);
                    stack.blocks[i] = null;
                }
                stack.count = 0;
                stack.closed |= close;
            }
        }
    }
}
