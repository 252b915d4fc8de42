package dev.compute.benchmarks.jmh;

import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.UnifiedMemoryManagerBuilder;
import java.time.Duration;
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
import org.openjdk.jmh.annotations.Warmup;

/**
 * The first request a freshly started manager serves, with and without a warm-up of that size
 * ({@code compute.memory.pooling.warmup}): one {@code allocate(bytes)} at the backend's default location (HOST on
 * the CPU, DEVICE on OpenCL), timed alone, on a manager built for that invocation and closed after it (neither is
 * timed). {@code before}: {@code nothing}, so the request makes the pool's first backend calls (on the CPU a range
 * reservation and a page map, on OpenCL a {@code clCreateBuffer}); {@code warmup}, a warm-up of one block of that
 * size, so it is a pool hit; {@code same-request}, the same request made and freed once in the set-up, the floor a
 * warm-up can reach (a hit on a manager whose code paths have run once). {@code bytes}: 64 KiB, from the small
 * arena, and 16 MiB, from the large one.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.SingleShotTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 20)
@Measurement(iterations = 100)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED", "-Xms1g", "-Xmx1g"})
public class FirstRequestLatency {

    @Param({"cpu", "opencl"})
    public String backend;

    @Param({"nothing", "warmup", "same-request"})
    public String before;

    @Param({"65536", "16777216"})
    public long bytes;

    private UnifiedMemoryManager manager;
    private MemoryLocation location;
    private UnifiedBuffer first;

    @Setup(Level.Invocation)
    public void start() {
        location = "cpu".equals(backend) ? MemoryLocation.HOST : MemoryLocation.DEVICE;
        UnifiedMemoryManagerBuilder builder = UnifiedMemoryManager.builder().backend(backend)
                .leakDetection(LeakDetectionLevel.DISABLED).trimInterval(Duration.ZERO).timelineInterval(Duration.ZERO);
        if ("warmup".equals(before)) {
            builder.warmup(location, bytes, 1);
        }
        manager = builder.build();
        switch (before) {
            case "nothing", "warmup" -> { }
            case "same-request" -> manager.allocate(bytes, location).close();
            default -> throw new IllegalArgumentException("before is 'nothing', 'warmup' or 'same-request', not '" + before + "'");
        }
    }

    @Benchmark
    public long firstRequest() {
        first = manager.allocate(bytes, location);
        return first.byteSize();
    }

    @TearDown(Level.Invocation)
    public void stop() {
        first.close();
        manager.close();
    }
}
