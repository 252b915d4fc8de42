package dev.compute.benchmarks.jmh;

import dev.compute.memory.AccessMode;
import dev.compute.memory.BufferAccess;
import dev.compute.memory.DataType;
import dev.compute.memory.FileMapMode;
import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
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
 * Reading a file of FLOAT32 values once through the op set, on the CPU backend: mapped as a buffer, or read into a
 * pooled buffer first. One operation is the whole file:
 * <ul>
 * <li>{@code readIntoPooledBufferThenSum}: {@code FileChannel.read} into a HOST buffer the pool holds for the whole
 *     trial (a service would keep one), in chunks of {@value #READ_CHUNK} bytes, then {@code ops().sum}: the baseline;</li>
 * <li>{@code mapThenSum}: {@code mapFile(READ_ONLY)}, {@code ops().sum}, close (which unmaps): the page tables are
 *     built anew each time;</li>
 * <li>{@code sumOfAnOpenMapping}: {@code ops().sum} of a mapping kept open for the trial, its pages mapped already;</li>
 * <li>{@code sumOfAPooledBuffer}: {@code ops().sum} of the pooled buffer, the file's bytes already in it: what the
 *     sum costs with no file at all.</li>
 * </ul>
 * The file is written once per trial and then sits in the page cache (the machine must have room for it): these are
 * warm-cache figures, which compare the copy the read makes with the page mapping the mapping makes. The pooled
 * buffer holds {@code fileBytes} of the pool's memory for the trial; the mapping holds none of it.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Warmup(iterations = 2, time = 3)
@Measurement(iterations = 5, time = 3)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED", "-Xms256m", "-Xmx256m"})
public class MappedFileRead {

    /** One {@code FileChannel.read} at most this many bytes; the file is read into the buffer in place. */
    static final int READ_CHUNK = 16 << 20;

    @Param({"1073741824"})
    public long fileBytes;

    private Path file;
    private UnifiedMemoryManager manager;
    private UnifiedBuffer pooled;
    private UnifiedBuffer openMapping;

    @Setup(Level.Trial)
    public void open() throws IOException {
        file = Files.createTempFile("mapped-file-read", ".f32");
        writeFloats(file, fileBytes);
        manager = UnifiedMemoryManager.builder().backend("cpu").leakDetection(LeakDetectionLevel.DISABLED)
                .maxPoolSize(Math.max(fileBytes, 1L << 30) * 2).build();
        pooled = manager.allocate(DataType.FLOAT32, fileBytes / 4, MemoryLocation.HOST);
        readInto(pooled);
        openMapping = manager.mapFile(file, DataType.FLOAT32, FileMapMode.READ_ONLY);
    }

    /** Values 0, 1, ..., 1023 over and over, so every sum is the same exact figure. */
    private static void writeFloats(Path file, long bytes) throws IOException {
        ByteBuffer chunk = ByteBuffer.allocateDirect(READ_CHUNK).order(ByteOrder.nativeOrder());
        for (int i = 0; chunk.hasRemaining(); i++) {
            chunk.putFloat(i % 1024);
        }
        try (FileChannel channel = FileChannel.open(file, StandardOpenOption.WRITE)) {
            for (long written = 0; written < bytes; ) {
                chunk.clear().limit((int) Math.min(READ_CHUNK, bytes - written));
                while (chunk.hasRemaining()) {
                    written += channel.write(chunk, written);
                }
            }
        }
    }

    @TearDown(Level.Trial)
    public void close() throws IOException {
        openMapping.close();
        pooled.close();
        manager.close();
        Files.deleteIfExists(file);
    }

    private void readInto(UnifiedBuffer buffer) throws IOException {
        try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ);
             BufferAccess access = buffer.hostAccess(AccessMode.WRITE)) {
            MemorySegment bytes = access.segment();
            for (long done = 0; done < fileBytes; ) {
                ByteBuffer target = bytes.asSlice(done, Math.min(READ_CHUNK, fileBytes - done)).asByteBuffer();
                while (target.hasRemaining()) {
                    if (channel.read(target, done + target.position()) < 0) {
                        throw new IOException(file + " ended early");
                    }
                }
                done += target.capacity();
            }
        }
    }

    @Benchmark
    public double readIntoPooledBufferThenSum() throws IOException {
        readInto(pooled);
        return manager.ops().sum(pooled);
    }

    @Benchmark
    public double mapThenSum() throws IOException {
        try (UnifiedBuffer mapped = manager.mapFile(file, DataType.FLOAT32, FileMapMode.READ_ONLY)) {
            return manager.ops().sum(mapped);
        }
    }

    @Benchmark
    public double sumOfAnOpenMapping() {
        return manager.ops().sum(openMapping);
    }

    @Benchmark
    public double sumOfAPooledBuffer() {
        return manager.ops().sum(pooled);
    }
}
