package dev.compute.benchmarks.jmh;

import dev.compute.memory.AccessMode;
import dev.compute.memory.BufferAccess;
import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CountDownLatch;
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
import org.openjdk.jmh.infra.Blackhole;

/**
 * What the buffer lifetime rule costs: views and accesses hold a buffer open through a scope whose segments live
 * in an arena. Every method works on 4 KiB HOST buffers of one manager on the CPU backend (pooled, as
 * {@link ManagerAllocateFree} with {@code pooling=pooled}), so {@link #allocateClose()} is the same pair as
 * {@code ManagerAllocateFree.sameSize} and the others read as what they add to it:
 * <ul>
 * <li>{@code allocateClose}: allocate, close; no view.</li>
 * <li>{@code viewTakenAndDropped}: allocate, {@code hostView()}, one {@code long} written through it, close
 *     (which ends the view's confined arena on this thread).</li>
 * <li>{@code accessTakenAndEnded}: allocate, {@code hostAccess(WRITE)} in try-with-resources, one {@code long}
 *     written through its segment, the access ended, close.</li>
 * <li>{@code viewOfOpenBuffer}: {@code hostView()} of a buffer the thread keeps open for the whole trial, and one
 *     {@code long} written: a repeat view on a thread reuses that thread's arena for the buffer.</li>
 * <li>{@code sharedAccessTakenAndEnded}: as {@code accessTakenAndEnded} with {@code sharedHostAccess(WRITE)}:
 *     ending it closes a shared arena, a handshake with every thread of the JVM.</li>
 * </ul>
 * Each also as {@code ...TwoThreads}: two threads on the same manager, the time per operation on each thread.
 *
 * <p>{@code idleThreads}: platform threads parked for the whole trial. Closing a shared arena stops every thread at
 * a handshake, so its cost grows with the threads alive; closing a confined one does not, and these figures show
 * whether that holds. {@code leakDetection}: {@code disabled} or {@code simple} (the default), as in
 * {@link ManagerAllocateFree}.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED", "-Xms1g", "-Xmx1g"})
public class BufferLifetimeCost {

    private static final long BYTES = AllocationSizes.SAME_SIZE;
    private static final long WRITTEN = 0x5EED_C0DEL;

    @Param({"disabled", "simple"})
    public String leakDetection;

    @Param({"0", "200"})
    public int idleThreads;

    private UnifiedMemoryManager manager;
    private final List<Thread> parked = new ArrayList<>();
    private final CountDownLatch stop = new CountDownLatch(1);

    /** A buffer its benchmark thread opens before the trial, takes views of throughout, and closes after it. */
    @State(Scope.Thread)
    public static class OpenBuffer {
        UnifiedBuffer buffer;

        @Setup(Level.Trial)
        public void open(BufferLifetimeCost benchmark) {
            buffer = benchmark.manager.allocate(BYTES, MemoryLocation.HOST);
        }

        @TearDown(Level.Trial)
        public void close() {
            buffer.close();
        }
    }

    @Setup(Level.Trial)
    public void open() throws InterruptedException {
        manager = UnifiedMemoryManager.builder()
                .backend("cpu")
                .leakDetection(LeakDetectionLevel.valueOf(leakDetection.toUpperCase(Locale.ROOT)))
                .build();
        CountDownLatch started = new CountDownLatch(idleThreads);
        for (int i = 0; i < idleThreads; i++) {
            parked.add(Thread.ofPlatform().daemon().name("idle-" + i).start(() -> {
                started.countDown();
                awaitStop();
            }));
        }
        started.await();
    }

    private void awaitStop() {
        try {
            stop.await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    @TearDown(Level.Trial)
    public void close() throws InterruptedException {
        manager.close();
        stop.countDown();
        for (Thread thread : parked) {
            thread.join();
        }
    }

    @Benchmark
    public long allocateClose() {
        return allocateAndClose();
    }

    @Benchmark
    @Threads(2)
    public long allocateCloseTwoThreads() {
        return allocateAndClose();
    }

    @Benchmark
    public void viewTakenAndDropped(Blackhole blackhole) {
        takeAndDropView(blackhole);
    }

    @Benchmark
    @Threads(2)
    public void viewTakenAndDroppedTwoThreads(Blackhole blackhole) {
        takeAndDropView(blackhole);
    }

    @Benchmark
    public void accessTakenAndEnded(Blackhole blackhole) {
        takeAndEndAccess(false, blackhole);
    }

    @Benchmark
    @Threads(2)
    public void accessTakenAndEndedTwoThreads(Blackhole blackhole) {
        takeAndEndAccess(false, blackhole);
    }

    @Benchmark
    public void viewOfOpenBuffer(OpenBuffer open, Blackhole blackhole) {
        write(open.buffer.hostView(), blackhole);
    }

    @Benchmark
    @Threads(2)
    public void viewOfOpenBufferTwoThreads(OpenBuffer open, Blackhole blackhole) {
        write(open.buffer.hostView(), blackhole);
    }

    @Benchmark
    public void sharedAccessTakenAndEnded(Blackhole blackhole) {
        takeAndEndAccess(true, blackhole);
    }

    @Benchmark
    @Threads(2)
    public void sharedAccessTakenAndEndedTwoThreads(Blackhole blackhole) {
        takeAndEndAccess(true, blackhole);
    }

    /** The pair of {@code ManagerAllocateFree.sameSize}, to the letter. */
    private long allocateAndClose() {
        UnifiedBuffer buffer = manager.allocate(BYTES, MemoryLocation.HOST);
        long size = buffer.byteSize();
        buffer.close();
        return size;
    }

    private void takeAndDropView(Blackhole blackhole) {
        UnifiedBuffer buffer = manager.allocate(BYTES, MemoryLocation.HOST);
        write(buffer.hostView(), blackhole);
        buffer.close();
    }

    private void takeAndEndAccess(boolean shared, Blackhole blackhole) {
        UnifiedBuffer buffer = manager.allocate(BYTES, MemoryLocation.HOST);
        try (BufferAccess access = shared ? buffer.sharedHostAccess(AccessMode.WRITE) : buffer.hostAccess(AccessMode.WRITE)) {
            write(access.segment(), blackhole);
        }
        buffer.close();
    }

    /** A store to native memory stays; the segment escapes to the blackhole, as a segment a caller passes on does. */
    private static void write(MemorySegment segment, Blackhole blackhole) {
        segment.set(ValueLayout.JAVA_LONG, 0, WRITTEN);
        blackhole.consume(segment);
    }
}
