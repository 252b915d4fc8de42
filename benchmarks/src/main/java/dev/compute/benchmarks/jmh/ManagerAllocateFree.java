package dev.compute.benchmarks.jmh;

import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.recording.AllocationTrace;
import dev.compute.memory.recording.RecordingOptions;
import java.util.Locale;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.TearDown;

/**
 * Allocate+free pairs through the public API, {@code manager.allocate(bytes, HOST)} then {@code close()}, on the
 * CPU backend with its default settings: the whole chain a service goes through (leak tracking, statistics, the
 * caching pool or, with {@code pooling=unpooled}, the backend itself, as {@code compute.memory.pooling.enabled=false}
 * configures it). Leak detection {@code disabled} and {@code simple} (the default, one buffer in 128 tracked).
 * {@code recording}: {@code idle} (the default: the recording adaptor tops each chain, and nothing records) or
 * {@code off} ({@code compute.memory.recording.enabled=false}: no adaptor, the chain as it was before recording
 * existed), so that one run measures what an idle recorder costs; {@code active}: a recording without call sites runs
 * through each measurement iteration (started before it, stopped after; an iteration that fills the recording's
 * {@value RecordingOptions#MAX_EVENTS} events fails, since it would measure a recorder that stopped: shorten
 * {@code -r}).
 */
public class ManagerAllocateFree extends AllocateFreePairs {

    @Param({"pooled", "unpooled"})
    public String pooling;

    @Param({"disabled", "simple"})
    public String leakDetection;

    @Param({"idle"})
    public String recording;

    private UnifiedMemoryManager manager;

    @Setup(Level.Trial)
    public void open() {
        manager = UnifiedMemoryManager.builder()
                .backend("cpu")
                .poolingEnabled(switch (pooling) {
                    case "pooled" -> true;
                    case "unpooled" -> false;
                    default -> throw new IllegalArgumentException("pooling is 'pooled' or 'unpooled', not '" + pooling + "'");
                })
                .leakDetection(LeakDetectionLevel.valueOf(leakDetection.toUpperCase(Locale.ROOT)))
                .allocationRecording(switch (recording) {
                    case "idle", "active" -> true;
                    case "off" -> false;
                    default -> throw new IllegalArgumentException("recording is 'idle', 'off' or 'active', not '" + recording + "'");
                })
                .build();
    }

    @Setup(Level.Iteration)
    public void startRecording() {
        if (recording.equals("active")) {
            manager.startRecording(new RecordingOptions(RecordingOptions.MAX_EVENTS, 0));
        }
    }

    @TearDown(Level.Iteration)
    public void stopRecording() {
        if (recording.equals("active")) {
            AllocationTrace trace = manager.stopRecording();
            if (trace.truncated()) {
                throw new IllegalStateException("the recording filled its " + RecordingOptions.MAX_EVENTS
                        + " events within the iteration, and the rest measured a stopped recorder: shorten -r");
            }
        }
    }

    @TearDown(Level.Trial)
    public void close() {
        manager.close();
    }

    @Override
    protected long pair(long bytes) {
        UnifiedBuffer buffer = manager.allocate(bytes, MemoryLocation.HOST);
        long size = buffer.byteSize();
        buffer.close();
        return size;
    }
}
