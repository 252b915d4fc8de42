package dev.compute.memory.resource.pool;

import dev.compute.memory.internal.ThreadStripes;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;

/**
 * The fast path: per small size class, a short stack of blocks freed and not yet coalesced, so that a size
 * freed and asked for again (the common case: the same tensors every step) costs one atomic step on its
 * class's stack and no tree walk. The stacks are striped by thread (a thread uses the stripe its id picks, as
 * Netty's thread caches and HikariCP's thread-local lists do), so two threads working on the same size do
 * not fight over one lock and one cache line. A block belongs to the stripe of the thread that allocated it: its
 * free caches it there, whichever thread frees it, and a take looks in the calling thread's stripe only, so two
 * threads do not hand blocks (and the cache lines they wrote) back and forth. Blocks wait in it as
 * {@link PoolBlock#CACHED}; the pool flushes every stripe into its arena (coalescing them) on trim, close and
 * pressure, and before it asks the backend for memory once small blocks hold more than a small allowance per
 * thread stripe that keeps blocks, so the cache makes the pool hold at most that allowance more for each.
 *
 * <p>A class's stacks are created by the pool under its lock and published through final fields, so a
 * reader without the lock sees either null (and takes the slow path) or a whole stack.
 *
 * <p>A stack is guarded by a flag rather than its monitor: claiming it is one compare-and-set, leaving it a
 * plain release store (a monitor costs an atomic step on each). The fast path only tries the flag, and takes
 * the slow path when another thread holds it; a flush or a reader waits for it, which is short, since a holder
 * only moves a few references and never blocks.
 */
final class SizeClassCache {

    /** Blocks kept per size class: enough for a step's repeats of one shape, few enough to stay small. */
    static final int DEPTH = 8;

    /**
     * Padding ahead of a stack's fields. The stacks of one size class are made together, one per stripe, so they lie
     * side by side in the heap; without padding two threads on different stripes would write one cache line (the
     * lock in the header, the count) on every allocate and free. Fields of a superclass come first; the int fills
     * the gap after the header, where a subclass field could otherwise be placed.
     */
    @SuppressWarnings("unused")
    private abstract static class PaddedAhead {
        int gap;
        long p0, p1, p2, p3, p4, p5, p6, p7;
    }

    private abstract static class StackFields extends PaddedAhead {
        /** The blocks at {@code SLOT_PAD ..}: the array is padded too, since it lies next to the following stack. */
        final PoolBlock[] slots = new PoolBlock[SLOT_PAD + DEPTH + SLOT_PAD];
        /** The size of every block of this stack's class. */
        final long blockSize;
        /** The stripe this stack belongs to. */
        final int stripe;
        int count;
        /** 1 while a thread holds the stack: its fields (and the blocks' states) are written only by the holder. */
        int held;
        /** Blocks taken from this stack: written by the holder, read without holding it. */
        long hits;
        boolean closed;
        /** On the holding queue: set by the push that finds it unlisted, cleared by the drain that takes it off. */
        boolean listed;

        StackFields(long blockSize, int stripe) {
            this.blockSize = blockSize;
            this.stripe = stripe;
        }
    }

    /** One stripe's stack of one size class, padded after its fields as well (see {@link PaddedAhead}). */
    @SuppressWarnings("unused")
    private static final class Stack extends StackFields {
        private static final VarHandle HELD;
        private static final VarHandle HITS;
        private static final VarHandle COUNT;

        static {
            try {
                MethodHandles.Lookup lookup = MethodHandles.lookup();
                HELD = lookup.findVarHandle(StackFields.class, "held", int.class);
                HITS = lookup.findVarHandle(StackFields.class, "hits", long.class);
                COUNT = lookup.findVarHandle(StackFields.class, "count", int.class);
            } catch (ReflectiveOperationException e) {
                throw new ExceptionInInitializerError(e);
            }
        }

        long q0, q1, q2, q3, q4, q5, q6, q7;

        Stack(long blockSize, int stripe) {
            super(blockSize, stripe);
        }

        boolean tryHold() {
            return HELD.compareAndSet(this, 0, 1);
        }

        /** Waits for the holder, which moves a few references and lets go (it may have been descheduled: yield). */
        void hold() {
            for (int spins = 0; !tryHold(); spins++) {
                if (spins < 64) {
                    Thread.onSpinWait();
                } else {
                    Thread.yield();
                }
            }
        }

        void letGo() {
            HELD.setRelease(this, 0);
        }

        /** Counts a hit; by the holder only, so a plain increment, stored opaquely for readers that do not hold. */
        void hit() {
            HITS.setOpaque(this, hits + 1);
        }

        long hitsSoFar() {
            return (long) HITS.getOpaque(this);
        }

        /** Whether the stack holds a block, read without holding it (the holder writes the count plainly). */
        boolean holdsSome() {
            return countNow() > 0;
        }

        /** How many blocks the stack holds, read without holding it, as {@link #holdsSome}. */
        int countNow() {
            return (int) COUNT.getOpaque(this);
        }

        PoolBlock get(int i) {
            return slots[SLOT_PAD + i];
        }

        void set(int i, @Nullable PoolBlock block) {
            slots[SLOT_PAD + i] = block;
        }
    }

    /** References on each side of a stack's slots: 64 bytes with compressed references. */
    private static final int SLOT_PAD = 16;

    private static final int STRIPES = ThreadStripes.COUNT;

    /** {@code stripes[s][sizeClass]}: one stripe's stacks; created lazily, class by class, under the pool's lock. */
    private final @Nullable Stack[][] stripes = new Stack[STRIPES][];
    /** The stacks that may hold blocks, each at most once: a flush visits these, not every class of every stripe. */
    private final ConcurrentLinkedQueue<Stack> holding = new ConcurrentLinkedQueue<>();
    /** Every stack made, for the count of hits. */
    private final ConcurrentLinkedQueue<Stack> made = new ConcurrentLinkedQueue<>();
    /** A bit per stripe that has listed a stack on {@link #holding} since the last flush: the stripes that keep blocks. */
    @SuppressWarnings("unused") // through CACHING
    private long cachingStripes;

    private static final VarHandle CACHING;

    static {
        try {
            CACHING = MethodHandles.lookup().findVarHandle(SizeClassCache.class, "cachingStripes", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /**
     * A block of exactly {@code size} bytes from this thread's stripe, made live for {@code requested} bytes, or null.
     * Only this thread's stripe: a block taken from another thread's stripe comes with cache lines that thread wrote
     * (the stack, the block), and two threads walking the same sizes would hand their one block of a class back and
     * forth on every request. A miss takes the pool's slow path, which gives this thread a block of its own from the
     * arena, and takes another stripe's ({@link #takeFromOtherStripes}) only once small blocks hold their allowance.
     */
    @Nullable PoolBlock take(long size, long requested) {
        Stack[] homeStripe = stripes[ThreadStripes.ofCurrentThread()];
        return homeStripe == null ? null : takeFrom(homeStripe[SizeClasses.smallClass(size)], requested);
    }

    /**
     * A cached block of exactly {@code size} bytes from any stripe but this thread's, made live for {@code requested}
     * bytes, or null; the caller {@linkplain #adopt adopts} it.
     */
    @Nullable PoolBlock takeFromOtherStripes(long size, long requested) {
        int sizeClass = SizeClasses.smallClass(size);
        int home = ThreadStripes.ofCurrentThread();
        PoolBlock block = null;
        for (int i = 1; block == null && i < STRIPES; i++) {
            Stack[] stripe = stripes[(home + i) & (STRIPES - 1)];
            block = stripe == null ? null : takeFrom(stripe[sizeClass], requested);
        }
        return block;
    }

    /**
     * How many stripes keep blocks: the calling thread's, and each that has cached a block since the last flush. For
     * the slow path's choice between growing and economizing.
     */
    int stripesKeeping() {
        return Long.bitCount((long) CACHING.getOpaque(this) | 1L << ThreadStripes.ofCurrentThread());
    }

    private static @Nullable PoolBlock takeFrom(@Nullable Stack stack, long requested) {
        if (stack == null || stack.count == 0 || !stack.tryHold()) {
            return null; // a racy look, so that empty stacks cost no atomic step; the held check below decides
        }
        try {
            if (stack.count == 0 || stack.closed) {
                return null;
            }
            PoolBlock block = stack.get(--stack.count);
            stack.set(stack.count, null);
            block.reuse(requested);
            stack.hit();
            return block;
        } finally {
            stack.letGo();
        }
    }

    /**
     * Caches a live small block on the stripe of the thread that allocated it (as Netty returns a buffer to its
     * allocating thread's cache), so that a thread that allocates what another frees still finds its blocks on its own
     * stripe. False when that stack is full, held or not set up (the caller frees the block the slow way).
     */
    boolean offer(PoolBlock block) {
        Stack[] stripe = stripes[block.stripe];
        Stack stack = stripe == null ? null : stripe[SizeClasses.smallClass(block.size)];
        if (stack == null || !stack.tryHold()) {
            return false;
        }
        boolean list;
        try {
            if (stack.count == DEPTH || stack.closed || block.state != PoolBlock.LIVE) {
                return false;
            }
            block.state = PoolBlock.CACHED;
            stack.set(stack.count++, block);
            list = !stack.listed;
            stack.listed = true;
        } finally {
            stack.letGo();
        }
        if (list) {
            holding.add(stack);
            long stripeBit = 1L << stack.stripe;
            if (((long) CACHING.getOpaque(this) & stripeBit) == 0) {
                CACHING.getAndBitwiseOr(this, stripeBit);
            }
        }
        return true;
    }

    /**
     * Makes a block from the arena or another stripe the calling thread's: its frees go to this thread's stripe.
     * Creates the stacks of its size class in every stripe first, so that its free can take the fast path. Under the
     * pool's lock.
     */
    void adopt(PoolBlock block) {
        int sizeClass = SizeClasses.smallClass(block.size);
        for (int s = 0; s < STRIPES; s++) {
            Stack[] stripe = stripes[s];
            if (stripe == null) {
                stripe = new Stack[SizeClasses.SMALL_CLASSES];
                stripes[s] = stripe;
            }
            if (stripe[sizeClass] == null) {
                Stack stack = new Stack(block.size, s);
                stripe[sizeClass] = stack;
                made.add(stack);
            }
        }
        block.stripe = (byte) ThreadStripes.ofCurrentThread();
    }

    /**
     * The size of the largest block cached now, or 0. Reads each listed stack's count without holding the stack, so
     * that reading the pool's figures neither changes the pool nor makes an allocate or free find its stack held
     * (which sent it down the slow path and, the first time, had the JIT recompile the fast path). A take or offer
     * under way may be missed, as by any figure read while calls run.
     */
    long largestCached() {
        long largest = 0;
        for (Stack stack : holding) {
            if (stack.holdsSome()) {
                largest = Math.max(largest, stack.blockSize);
            }
        }
        return largest;
    }

    /**
     * Bytes of the blocks cached now (each stack's blocks are of its class's size), read as {@link #largestCached}
     * reads: without holding the stacks, so a take or offer under way may be missed.
     */
    long cachedBytes() {
        long bytes = 0;
        for (Stack stack : holding) {
            bytes += stack.countNow() * stack.blockSize;
        }
        return bytes;
    }

    /** Allocations served from the cache so far: exact when no take is under way. */
    long hits() {
        long hits = 0;
        for (Stack stack : made) {
            hits += stack.hitsSoFar();
        }
        return hits;
    }

    /** Hands every cached block to {@code sink} (the arena's release). Under the pool's lock. */
    void flush(Consumer<PoolBlock> sink) {
        CACHING.setOpaque(this, 0L); // first: a stripe that caches while the stacks drain is counted again
        for (Stack stack = holding.poll(); stack != null; stack = holding.poll()) {
            drain(stack, sink, AfterDrain.KEEP_CACHING);
        }
    }

    /** Flushes and refuses blocks from now on. Under the pool's lock. */
    void close(Consumer<PoolBlock> sink) {
        for (Stack[] stripe : stripes) {
            if (stripe == null) {
                continue;
            }
            for (Stack stack : stripe) {
                if (stack != null) {
                    drain(stack, sink, AfterDrain.REFUSE);
                }
            }
        }
        holding.clear();
    }

    /** What a stack does once drained: cache blocks again (a flush), or refuse them from now on (a close). */
    private enum AfterDrain { KEEP_CACHING, REFUSE }

    private static void drain(Stack stack, Consumer<PoolBlock> sink, AfterDrain after) {
        stack.hold();
        try {
            for (int i = 0; i < stack.count; i++) {
                sink.accept(stack.get(i));
                stack.set(i, null);
            }
            stack.count = 0;
            stack.listed = false;
            stack.closed |= after == AfterDrain.REFUSE;
        } finally {
            stack.letGo();
        }
    }
}
