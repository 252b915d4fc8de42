package dev.compute.benchmarks.jmh;

import dev.compute.memory.DataType;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
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
 * The OpenCL backend's blocking copies of a small DEVICE buffer from and to a Java array, on the OpenCL device at hand
 * (PoCL here: start the JVM with {@code LD_PRELOAD=$JAVA_HOME/lib/libjsig.so}): what the bound on a blocking command's
 * wait for work queued ahead of it costs. {@code copyFromAndTo}: the queue idle before each copy; {@code opThenCopyTo}:
 * an op queued, then a read of its result (which waits for the op on the host first), the pattern of a service that
 * launches and reads back.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED", "-Xms1g", "-Xmx1g"})
public class OpenClBlockingCopyCost {

    @Param("16")
    public int floats;

    private UnifiedMemoryManager manager;
    private UnifiedBuffer buffer;
    private float[] values;

    @Setup(Level.Trial)
    public void open() {
        manager = UnifiedMemoryManager.builder().backend("opencl").timelineInterval(Duration.ZERO).build();
        buffer = manager.allocate(DataType.FLOAT32, floats, MemoryLocation.DEVICE);
        values = new float[floats];
        buffer.copyFrom(values);
    }

    @TearDown(Level.Trial)
    public void close() {
        buffer.close();
        manager.close();
    }

    @Benchmark
    public float[] copyFromAndTo() {
        buffer.copyFrom(values);
        buffer.copyTo(values);
        return values;
    }

    @Benchmark
    public float[] opThenCopyTo() {
        manager.ops().scaleAsync(buffer, 1.0);
        buffer.copyTo(values);
        return values;
    }
}
