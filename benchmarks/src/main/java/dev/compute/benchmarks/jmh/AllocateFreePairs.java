package dev.compute.benchmarks.jmh;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Threads;
import org.openjdk.jmh.annotations.Warmup;

/**
 * One allocate and one free, back to back: the time of a pair, in nanoseconds. Four shapes, the same for every
 * allocator: one size over and over (the pool's fast path), mixed sizes ({@link AllocationSizes}), each on one
 * thread and on two threads sharing the allocator (JMH reports the time per pair on each thread).
 *
 * <p>A subclass says what one pair is, in {@link #pair(long)}; JMH runs these benchmark methods for each
 * concrete subclass. Each parameter combination runs in a fresh JVM, so {@code pair} sees one allocator only
 * and the JIT can inline it as it would in a service.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED", "-Xms1g", "-Xmx1g"})
public abstract class AllocateFreePairs {

    /** Where each thread is in the cycle of mixed sizes; threads start apart so they do not ask in lockstep. */
    @State(Scope.Thread)
    public static class Cursor {
        private static final AtomicInteger STARTS = new AtomicInteger();
        int next = STARTS.getAndIncrement() * (AllocationSizes.MIXED_COUNT / 2 + 1);

        long nextSize() {
            return AllocationSizes.mixed(next++);
        }
    }

    /** Allocates {@code bytes} bytes and frees them again; returns something of the allocation, so that it is not optimised away. */
    protected abstract long pair(long bytes);

    @Benchmark
    public long sameSize() {
        return pair(AllocationSizes.SAME_SIZE);
    }

    @Benchmark
    public long mixedSizes(Cursor cursor) {
        return pair(cursor.nextSize());
    }

    @Benchmark
    @Threads(2)
    public long sameSizeTwoThreads() {
        return pair(AllocationSizes.SAME_SIZE);
    }

    @Benchmark
    @Threads(2)
    public long mixedSizesTwoThreads(Cursor cursor) {
        return pair(cursor.nextSize());
    }
}
