package dev.compute.benchmarks.jmh;

import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import java.time.Duration;
import java.util.Locale;
import org.openjdk.jol.info.ClassLayout;
import org.openjdk.jol.info.GraphLayout;

/**
 * The heap a live buffer costs: the {@link UnifiedBuffer} and everything the manager, its resource chain, the
 * pool and the backend keep for its block. Measured with JOL as the growth of the whole object graph reachable
 * from the manager and the buffers when {@code n} more buffers are live, divided by {@code n}, less the slot each
 * buffer takes in the array that holds them here. Shared things (the manager, the chain, segments the pool
 * carves many blocks from) cancel out; what one more live buffer costs remains.
 *
 * <p>Usage: {@code java -jar benchmarks/target/compute-benchmarks.jar heap-cost [n] [size]} (default 4096 buffers of
 * 4096 bytes, CPU backend, HOST). Prints one line per leak-detection level, {@code disabled} and {@code simple}.
 * The timeline and scheduled trims are switched off so that no background thread changes the graph between the
 * two walks. Run it with {@code -XX:+UseCompressedOops} (the default below 32 GB of heap), as a service would.
 */
public final class BufferHeapCost {

    /** The goal of issue 6: a live buffer costs at most this many bytes of heap. */
    static final long GOAL_BYTES = 128;

    private BufferHeapCost() {}

    public static void main(String[] args) {
        System.exit(run(args));
    }

    /** The {@code heap-cost} subcommand; exits 0 whether or not the goal is met (the lines say which). */
    public static int run(String[] args) {
        // records' fields have no Unsafe offsets; JOL then finds them by its own probe
        System.setProperty("jol.magicFieldOffset", "true");
        int n;
        long size;
        try {
            if (args.length > 2) {
                throw new IllegalArgumentException("takes at most two arguments, got " + args.length);
            }
            n = args.length > 0 ? Integer.parseInt(args[0]) : 4096;
            size = args.length > 1 ? Long.parseLong(args[1]) : 4096;
            if (n < 1 || size < 1) {
                throw new IllegalArgumentException("BUFFERS and SIZE must be 1 or more");
            }
        } catch (IllegalArgumentException e) { // NumberFormatException too
            System.err.println("heap-cost: " + e.getMessage());
            System.err.println("usage: heap-cost [BUFFERS [SIZE]]   (live buffers measured, default 4096, of SIZE bytes, default 4096)");
            return 2;
        }
        System.out.println("UnifiedBuffer shallow size: " + ClassLayout.parseClass(UnifiedBuffer.class).instanceSize() + " bytes");
        for (LeakDetectionLevel level : new LeakDetectionLevel[] {LeakDetectionLevel.DISABLED, LeakDetectionLevel.SIMPLE}) {
            double perBuffer = measure(level, n, size);
            System.out.printf(Locale.ROOT, "heap_cost leak_detection=%s buffers=%d size=%d bytes_per_live_buffer=%.1f goal=%d %s%n",
                    level.name().toLowerCase(Locale.ROOT), n, size, perBuffer, GOAL_BYTES, perBuffer <= GOAL_BYTES ? "met" : "NOT met");
        }
        return 0;
    }

    /** Bytes of heap per extra live buffer, from the graph with {@code n} and with {@code 2n} buffers live. */
    static double measure(LeakDetectionLevel level, int n, long size) {
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder()
                .backend("cpu")
                .leakDetection(level)
                .trimInterval(Duration.ZERO)
                .timelineInterval(Duration.ZERO)
                .build()) {
            // warm the pool and every lazily made structure first: allocate and free as many as will be measured
            UnifiedBuffer[] warm = allocate(manager, 2 * n, size);
            for (UnifiedBuffer buffer : warm) {
                buffer.close();
            }
            UnifiedBuffer[] first = allocate(manager, n, size);
            long withN = graphBytes(manager, first, new UnifiedBuffer[0]);
            UnifiedBuffer[] second = allocate(manager, n, size);
            long with2N = graphBytes(manager, first, second);
            // the graph includes the holding array's reference slots; they are ours, not the library's
            long slots = ClassLayout.parseInstance(second).instanceSize() - ClassLayout.parseInstance(new UnifiedBuffer[0]).instanceSize();
            for (UnifiedBuffer buffer : first) {
                buffer.close();
            }
            for (UnifiedBuffer buffer : second) {
                buffer.close();
            }
            return (double) (with2N - withN - slots) / n;
        }
    }

    private static UnifiedBuffer[] allocate(UnifiedMemoryManager manager, int n, long size) {
        UnifiedBuffer[] buffers = new UnifiedBuffer[n];
        for (int i = 0; i < n; i++) {
            buffers[i] = manager.allocate(size, MemoryLocation.HOST);
        }
        return buffers;
    }

    private static long graphBytes(UnifiedMemoryManager manager, UnifiedBuffer[] first, UnifiedBuffer[] second) {
        return GraphLayout.parseInstance(manager, first, second).totalSize();
    }
}
