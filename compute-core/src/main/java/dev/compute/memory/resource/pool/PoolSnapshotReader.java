package dev.compute.memory.resource.pool;

import dev.compute.memory.MemorySnapshot;
import dev.compute.memory.internal.UserCode;
import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;

/**
 * Reads a pool's segments and blocks as they were at one moment, holding the pool's lock for a short stretch at a time
 * ({@link #HOLD_NANOS} at most, however many blocks the pool has), so that the allocations and frees that need the
 * lock are not held up for long while a big pool is read.
 *
 * <p><b>How.</b> While a reader runs, the pool logs, under its lock as it changes them, every block whose place, size
 * or state it changes and every free block whose pages it maps or unmaps ({@link CachingPoolResource#touched}). The
 * reader, releasing the lock between stretches:
 * <ol>
 * <li>walks each segment in address order, copying its blocks, a stretch per hold. It resumes after the last block it
 * copied; a block that now straddles that place has changed since, and is left to step 2;</li>
 * <li>takes what the log holds (each block once, however often it changed) and copies again each of those blocks that
 * is still in its segment, a stretch per hold; a copy replaces every earlier copy it overlaps. Meanwhile the log fills
 * again, with less each time: it holds only what changed during the last batch;</li>
 * <li>when what it takes from the log is short ({@link #LAST_BATCH} blocks at most), it copies it within that hold,
 * takes the list of segments and stops the log: that hold is the moment the snapshot shows.</li>
 * </ol>
 * <b>Why that is exact at the moment of the last hold.</b> A block that has not changed since the log started is as the
 * walk copied it. A block that changed is in the log after its last change, so a later batch copied it as it is now. A block
 * copied as it once was overlaps, now, only blocks that changed since (two blocks of one moment never overlap), and
 * their copies replace it. So the copies left tile every segment as it is at that moment; the reader checks that they
 * do, and walks the pool under one hold if they do not.
 *
 * <p>The size-class cache moves blocks between live and cached under its own locks, not the pool's: such a block
 * shows as it was before or after, as it does in a walk under the lock. A reader whose thread holds the pool's lock
 * already (a listener told of a backend call), or of a closed pool, walks under that one hold. Should the pool change
 * faster than the log can be read, the reader reads what is left in one hold after {@link #MAX_LOG_HOLDS} holds.
 * Not thread-safe: one reader per call; any number of readers may run at once.
 */
final class PoolSnapshotReader {

    /** The longest one stretch under the pool's lock lasts, in nanoseconds (checked every {@link #CHECK_EVERY} blocks). */
    static final long HOLD_NANOS = 200_000;
    private static final int CHECK_EVERY = 32;
    /** Holds spent copying batches from the log before the rest is copied in one hold. */
    static final int MAX_LOG_HOLDS = 256;
    /** A batch taken from the log that is at most this long is copied within the hold that took it: the last hold. */
    static final int LAST_BATCH = 1024;
    /** Blocks copied last that a stretch may resume after, the latest first. */
    private static final int RESUME_CANDIDATES = 64;

    private final CachingPoolResource pool;
    private final ReentrantLock lock;
    private final long holdNanos;
    private final int blocksPerHold;
    private final Runnable betweenHolds;
    private final @Nullable Consumer<List<MemorySnapshot.Segment>> atLastHold;

    private final Map<PoolSegment, SegmentCopy> copies = new IdentityHashMap<>();
    private final List<PoolSegment> toWalk = new ArrayList<>();
    private final PoolBlock[] lastCopied = new PoolBlock[RESUME_CANDIDATES];
    private int lastCopiedCount;
    private int walking;
    private long resumeAt;
    private CachingPoolResource.@Nullable ChangeLog log;
    /** The blocks taken from the log last, each once, and how many of them are copied. */
    private List<PoolBlock> batch = List.of();
    private int batchPosition;
    private int logHolds;
    private int holds;
    private long longestHoldNanos;
    private boolean underOneHold;

    /** The copies of one segment's blocks: those the walk made, in address order, and those made from the log. */
    private static final class SegmentCopy {
        final Walked walked = new Walked();
        /** Copies of logged blocks by offset, none overlapping another. */
        final TreeMap<Long, Copy> fromLog = new TreeMap<>();
    }

    private static final MemorySnapshot.BlockState[] STATES = MemorySnapshot.BlockState.values();

    /**
     * The pieces the walk copied, in address order, as numbers, in chunks: the records are made after, without the lock,
     * and no hold copies a long array as it grows, so that a hold copies as many blocks as it can.
     */
    private static final class Walked implements PoolArena.Pieces {
        private static final int CHUNK = 4096;
        private final List<long[]> chunks = new ArrayList<>();
        private final List<byte[]> stateChunks = new ArrayList<>();
        private long[] chunk;
        private byte[] states;
        int count;

        @Override
        public void piece(long offset, long size, MemorySnapshot.BlockState state, long requestedBytes) {
            int at = count % CHUNK;
            if (at == 0) {
                chunk = new long[3 * CHUNK];
                states = new byte[CHUNK];
                chunks.add(chunk);
                stateChunks.add(states);
            }
            chunk[3 * at] = offset;
            chunk[3 * at + 1] = size;
            chunk[3 * at + 2] = requestedBytes;
            states[at] = (byte) state.ordinal();
            count++;
        }

        long offset(int i) {
            return chunks.get(i / CHUNK)[3 * (i % CHUNK)];
        }

        long size(int i) {
            return chunks.get(i / CHUNK)[3 * (i % CHUNK) + 1];
        }

        MemorySnapshot.Block block(int i) {
            long[] c = chunks.get(i / CHUNK);
            int at = i % CHUNK;
            return new MemorySnapshot.Block(c[3 * at], c[3 * at + 1], STATES[stateChunks.get(i / CHUNK)[at]], c[3 * at + 2], null);
        }
    }

    /** One block as copied: its range and the pieces the snapshot shows for it. */
    private record Copy(long offset, long end, List<MemorySnapshot.Block> pieces) {}

    PoolSnapshotReader(CachingPoolResource pool) {
        this(pool, HOLD_NANOS, Integer.MAX_VALUE, () -> { }, null);
    }

    /**
     * For tests: at most {@code blocksPerHold} blocks or log entries per hold, {@code betweenHolds} run (without the
     * lock) after each hold but the last, and {@code atLastHold} handed a walk of the pool made within the last hold,
     * the moment the result must match.
     */
    PoolSnapshotReader(CachingPoolResource pool, long holdNanos, int blocksPerHold, Runnable betweenHolds,
                       @Nullable Consumer<List<MemorySnapshot.Segment>> atLastHold) {
        this.pool = pool;
        this.lock = pool.lock();
        this.holdNanos = holdNanos;
        this.blocksPerHold = blocksPerHold;
        this.betweenHolds = betweenHolds;
        this.atLastHold = atLastHold;
    }

    /** The segments, each with its blocks, as they were at one moment. */
    List<MemorySnapshot.Segment> read() {
        long start = System.nanoTime();
        List<MemorySnapshot.Segment> segments = readInStretches();
        int blocks = 0;
        for (MemorySnapshot.Segment segment : segments) {
            blocks += segment.blocks().size();
        }
        if (!UserCode.inListener()) {
            // told of a read it made, a listener that reads a snapshot on hearing of one would be called inside itself
            // without end
            pool.events().snapshotRead(pool.location(), blocks, holds, longestHoldNanos, System.nanoTime() - start);
        }
        return segments;
    }

    /** How many times the last {@link #read} took the pool's lock. */
    int holds() {
        return holds;
    }

    /** The longest the last {@link #read} held the pool's lock at once. */
    long longestHoldNanos() {
        return longestHoldNanos;
    }

    private void held(long since) {
        holds++;
        longestHoldNanos = Math.max(longestHoldNanos, System.nanoTime() - since);
    }

    private List<MemorySnapshot.Segment> readInStretches() {
        if (lock.isHeldByCurrentThread()) {
            return walkUnderOneHold();
        }
        boolean walked = false;
        List<PoolSegment> segments = null;
        try {
            while (segments == null) {
                boolean tookBatch = false;
                pool.lockToRead();
                long heldSince = System.nanoTime();
                try {
                    if (log == null) {
                        if (pool.isClosed()) {
                            return walkUnderOneHold();
                        }
                        log = pool.startChangeLog();
                        pool.segmentsInto(toWalk);
                    }
                    long deadline = System.nanoTime() + holdNanos;
                    if (!walked) {
                        walked = walk(deadline);
                    } else if (batchPosition < batch.size()) {
                        logHolds++;
                        copyBatch(deadline);
                    } else {
                        batch = log.take();
                        batchPosition = 0;
                        if (batch.size() <= Math.min(blocksPerHold, LAST_BATCH) || logHolds > MAX_LOG_HOLDS) {
                            copyBatch(Long.MAX_VALUE);
                            segments = new ArrayList<>();
                            pool.segmentsInto(segments);
                            if (atLastHold != null) {
                                atLastHold.accept(pool.walk());
                            }
                            pool.stopChangeLog(log);
                            log = null;
                        } else {
                            tookBatch = true;
                        }
                    }
                } finally {
                    held(heldSince);
                    lock.unlock();
                }
                if (tookBatch) {
                    batch = distinct(batch); // the reader's own list now: no lock needed to read it
                }
                if (segments == null) {
                    betweenHolds.run();
                }
            }
        } finally {
            if (log != null) {
                if (pool.lockedToRead()) {
                    try {
                        pool.stopChangeLog(log);
                    } finally {
                        lock.unlock();
                    }
                } else {
                    log.abandoned = true; // a listener that may not wait: the pool's next change stops the log
                }
            }
        }
        List<MemorySnapshot.Segment> out = assemble(segments);
        return out != null ? out : walkUnderOneHold();
    }

    /** Each block once: a block logged again and again (a size that comes and goes) is copied once a pass. */
    private static List<PoolBlock> distinct(List<PoolBlock> blocks) {
        Set<PoolBlock> seen = Collections.newSetFromMap(new IdentityHashMap<>(2 * blocks.size()));
        List<PoolBlock> out = new ArrayList<>();
        for (PoolBlock b : blocks) {
            if (seen.add(b)) {
                out.add(b);
            }
        }
        return out;
    }

    /** Whether the last {@link #read} walked the pool under one hold (a closed pool, a reentrant caller, copies that did not tile). */
    boolean readUnderOneHold() {
        return underOneHold;
    }

    private List<MemorySnapshot.Segment> walkUnderOneHold() {
        underOneHold = true;
        pool.lockToRead();
        long heldSince = System.nanoTime();
        try {
            List<MemorySnapshot.Segment> all = pool.walk();
            if (atLastHold != null) {
                atLastHold.accept(all);
            }
            return all;
        } finally {
            held(heldSince);
            lock.unlock();
        }
    }

    /** Step 1, one stretch: true when every segment has been walked. */
    private boolean walk(long deadline) {
        int copied = 0;
        while (walking < toWalk.size()) {
            PoolSegment segment = toWalk.get(walking);
            PoolBlock b = segment.retired ? null : resumeBlock(segment);
            SegmentCopy copy = copies.computeIfAbsent(segment, s -> new SegmentCopy());
            for (; b != null; b = b.next) {
                if (copied > 0 && (copied >= blocksPerHold || (copied % CHECK_EVERY == 0 && System.nanoTime() > deadline))) {
                    return false;
                }
                PoolArena.describe(b, copy.walked);
                resumeAt = b.end();
                lastCopied[lastCopiedCount++ % RESUME_CANDIDATES] = b;
                copied++;
            }
            walking++;
            resumeAt = 0;
            lastCopiedCount = 0;
        }
        return true;
    }

    /**
     * The first block of {@code segment} at or after {@link #resumeAt} that does not straddle it: found from the latest
     * block copied that is still in the segment's list before that place (a block that straddles it changed since it
     * was copied, and the log has it), else from the segment's first block.
     */
    private @Nullable PoolBlock resumeBlock(PoolSegment segment) {
        if (resumeAt == 0) {
            return segment.first;
        }
        PoolBlock from = segment.first;
        for (int i = 1; i <= Math.min(lastCopiedCount, RESUME_CANDIDATES); i++) {
            PoolBlock candidate = lastCopied[(lastCopiedCount - i) % RESUME_CANDIDATES];
            if (candidate.home == segment && PoolArena.linked(candidate) && candidate.offset < resumeAt) {
                from = candidate;
                break;
            }
        }
        PoolBlock b = from;
        while (b != null && b.end() <= resumeAt) {
            b = b.next;
        }
        return b != null && b.offset < resumeAt ? b.next : b;
    }

    /** Step 2, one stretch (or, with no deadline, all of it): copies the blocks of the batch taken from the log. */
    private void copyBatch(long deadline) {
        int copied = 0;
        while (batchPosition < batch.size()) {
            if (deadline != Long.MAX_VALUE && copied > 0
                    && (copied >= blocksPerHold || (copied % CHECK_EVERY == 0 && System.nanoTime() > deadline))) {
                return;
            }
            PoolBlock b = batch.get(batchPosition++);
            copied++;
            if (!b.home.retired && PoolArena.linked(b)) {
                List<MemorySnapshot.Block> pieces = new ArrayList<>(2);
                PoolArena.describe(b, (offset, size, state, requested) -> pieces.add(new MemorySnapshot.Block(offset, size, state, requested, null)));
                put(copies.computeIfAbsent(b.home, s -> new SegmentCopy()).fromLog, new Copy(b.offset, b.end(), pieces));
            }
        }
    }

    /** Puts a copy, removing the copies it overlaps. */
    private static void put(TreeMap<Long, Copy> copies, Copy copy) {
        Map.Entry<Long, Copy> before = copies.floorEntry(copy.offset());
        if (before != null && before.getValue().end() > copy.offset()) {
            copies.remove(before.getKey());
        }
        copies.subMap(copy.offset(), true, copy.end(), false).clear();
        copies.put(copy.offset(), copy);
    }

    /**
     * Step 3, without the lock: each segment of the last hold, with the copies from the log and the walked copies that
     * overlap none of them, in address order. Null where a segment's blocks do not tile it (which the argument above
     * rules out).
     */
    private @Nullable List<MemorySnapshot.Segment> assemble(List<PoolSegment> segments) {
        List<MemorySnapshot.Segment> out = new ArrayList<>(segments.size());
        for (PoolSegment segment : segments) {
            SegmentCopy copy = copies.get(segment);
            if (copy == null) {
                return null;
            }
            Walked walked = copy.walked;
            List<MemorySnapshot.Block> blocks = new ArrayList<>(walked.count + copy.fromLog.size());
            Iterator<Copy> logged = copy.fromLog.values().iterator();
            Copy next = logged.hasNext() ? logged.next() : null;
            for (int i = 0; i < walked.count; i++) {
                long offset = walked.offset(i);
                while (next != null && next.offset() <= offset) {
                    blocks.addAll(next.pieces());
                    next = logged.hasNext() ? logged.next() : null;
                }
                long end = offset + walked.size(i);
                Map.Entry<Long, Copy> overlapping = copy.fromLog.isEmpty() ? null : copy.fromLog.lowerEntry(end);
                if (overlapping == null || overlapping.getValue().end() <= offset) {
                    blocks.add(walked.block(i));
                }
            }
            for (; next != null; next = logged.hasNext() ? logged.next() : null) {
                blocks.addAll(next.pieces());
            }
            if (!tiles(blocks, segment.size())) {
                return null;
            }
            out.add(new MemorySnapshot.Segment(segment.base, segment.size(), segment.expandable(), blocks));
        }
        return out;
    }

    private static boolean tiles(List<MemorySnapshot.Block> blocks, long size) {
        long at = 0;
        for (MemorySnapshot.Block b : blocks) {
            if (b.offset() != at || b.sizeBytes() <= 0) {
                return false;
            }
            at += b.sizeBytes();
        }
        return at == size;
    }
}
