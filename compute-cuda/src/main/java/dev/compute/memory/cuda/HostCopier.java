package dev.compute.memory.cuda;

import dev.compute.memory.internal.LibraryThreads;
import dev.compute.memory.spi.FileMappings;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

/**
 * Host memory copies split across threads: one thread cannot fill pinned memory as fast as the device empties it,
 * several come close (the figures: docs/benchmarks.md), and staging is only as fast as this copy. The caller copies one
 * part itself, so a copy never waits for a free pool thread to start. Segments of confined arenas are copied by
 * the caller alone.
 */
final class HostCopier implements AutoCloseable {

    /** Below this a part is not worth handing to another thread. */
    static final long MIN_PART_BYTES = 1L << 20;

    private final int threads;
    private final ExecutorService pool;

    HostCopier(int threads, String name) {
        if (threads < 1) {
            throw new IllegalArgumentException("host copy threads must be at least 1: " + threads);
        }
        this.threads = threads;
        this.pool = Executors.newFixedThreadPool(Math.max(1, threads - 1), LibraryThreads.daemons(name, true));
    }

    int threads() {
        return threads;
    }

    /** Stands for "a thread other than the caller" when asking whether a segment may be shared out. */
    private static final Thread OTHER_THREAD = LibraryThreads.neverStarted();

    /** How many parts a copy of {@code bytes} is split into. */
    static int parts(long bytes, int threads) {
        return (int) Math.max(1, Math.min(threads, bytes / MIN_PART_BYTES));
    }

    void copy(MemorySegment source, long sourceOffset, MemorySegment target, long targetOffset, long bytes) {
        // a segment of a confined arena may only be touched by its owner thread: then the caller copies alone
        // and a mapped file by the caller alone too: a fault there (a file truncated under it) is thrown on the caller
        int parts = source.isAccessibleBy(OTHER_THREAD) && target.isAccessibleBy(OTHER_THREAD)
                && !FileMappings.isOverMapping(source) && !FileMappings.isOverMapping(target) ? parts(bytes, threads) : 1;
        if (parts == 1) {
            MemorySegment.copy(source, sourceOffset, target, targetOffset, bytes);
            return;
        }
        long part = Math.ceilDiv(bytes, parts);
        Future<?>[] others = new Future<?>[parts - 1];
        for (int i = 1; i < parts; i++) {
            long start = i * part;
            long length = Math.min(part, bytes - start);
            others[i - 1] = pool.submit(() -> MemorySegment.copy(source, sourceOffset + start, target, targetOffset + start, length));
        }
        MemorySegment.copy(source, sourceOffset, target, targetOffset, Math.min(part, bytes));
        // every part is waited for, even after an interrupt: the target (a staging slot) is reused right after
        boolean interrupted = false;
        Throwable failed = null;
        for (Future<?> other : others) {
            while (true) {
                try {
                    other.get();
                    break;
                } catch (InterruptedException e) {
                    interrupted = true;
                } catch (ExecutionException e) {
                    failed = failed == null ? e.getCause() : failed;
                    break;
                }
            }
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
        if (failed != null) {
            throw new IllegalStateException("a host copy part failed", failed);
        }
    }

    @Override
    public void close() {
        pool.shutdown();
    }
}
