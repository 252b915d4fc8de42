package dev.compute.benchmarks.jmh;

import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemoryStatistics;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Threads;
import org.openjdk.jmh.annotations.Warmup;

/**
 * What reading the figures costs the threads that allocate: the two-thread pairs of {@link ManagerAllocateFree}
 * ({@code manager.allocate(bytes, HOST)} then {@code close()}, the pool on the CPU backend), with {@code reader=on}
 * a third thread calling {@code manager.statistics()} (every location, exact and current) {@value #READS_PER_SECOND}
 * times a second, as a monitoring loop or a scrape without the starter's one-second snapshot would; with
 * {@code reader=off} no thread reads. {@code leakDetection}: {@code disabled} or {@code simple} (the default).
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED", "-Xms1g", "-Xmx1g"})
@Threads(2)
public class StatisticsReaderCost {

    static final int READS_PER_SECOND = 10;

    @Param({"off", "on"})
    public String reader;

    @Param({"disabled", "simple"})
    public String leakDetection;

    private UnifiedMemoryManager manager;
    private ScheduledExecutorService readerThread;
    /** What the reader read last, so that the reads are not optimised away. */
    private volatile Map<MemoryLocation, MemoryStatistics> read;

    @Setup(Level.Trial)
    public void open() {
        manager = UnifiedMemoryManager.builder().backend("cpu")
                .leakDetection(LeakDetectionLevel.valueOf(leakDetection.toUpperCase(Locale.ROOT))).build();
        readerThread = switch (reader) {
            case "off" -> null;
            case "on" -> Executors.newSingleThreadScheduledExecutor(Thread.ofPlatform().daemon().name("statistics-reader").factory());
            default -> throw new IllegalArgumentException("reader is 'on' or 'off', not '" + reader + "'");
        };
        if (readerThread != null) {
            long periodMillis = 1000 / READS_PER_SECOND;
            readerThread.scheduleAtFixedRate(() -> read = manager.statistics(), periodMillis, periodMillis, TimeUnit.MILLISECONDS);
        }
    }

    @TearDown(Level.Trial)
    public void close() throws InterruptedException {
        if (readerThread != null) {
            readerThread.shutdown();
            readerThread.awaitTermination(1, TimeUnit.SECONDS);
            if (read == null) {
                throw new IllegalStateException("the reader never read");
            }
        }
        manager.close();
    }

    @Benchmark
    public long sameSizeTwoThreads() {
        return pair(AllocationSizes.SAME_SIZE);
    }

    @Benchmark
    public long mixedSizesTwoThreads(AllocateFreePairs.Cursor cursor) {
        return pair(cursor.nextSize());
    }

    private long pair(long bytes) {
        UnifiedBuffer buffer = manager.allocate(bytes, MemoryLocation.HOST);
        long size = buffer.byteSize();
        buffer.close();
        return size;
    }
}
