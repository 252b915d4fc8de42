package dev.compute.benchmarks;

import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemorySnapshot;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicBoolean;
import jdk.jfr.Recording;
import jdk.jfr.consumer.RecordedEvent;
import jdk.jfr.consumer.RecordingFile;

/**
 * {@code big-pool-read [--live N] [--reads R]}: what reading a big pool costs, as the endpoint reads it (its view of one
 * location: every segment and block). A manager on the CPU backend, default settings, allocates 2N HOST buffers of 512
 * bytes to 16 KiB (log-uniform, seeded) and closes every other one, leaving N live blocks with free space between
 * them. Then R reads, each {@code manager.snapshot(HOST)} and a descriptor per block as the endpoint makes them, after
 * as many untimed ones: the time to answer, and, from the pool's {@code dev.compute.memory.SnapshotRead} JFR events, the
 * longest each read held the pool's lock at once (the median over the reads and the longest of all: a thread descheduled
 * while it holds the lock, or a garbage collection, makes a hold as long as the pause) and the most holds a read took (n/a for a pool that emits no such
 * event: one that walks under one hold). Then R reads more while a second thread allocates and closes a 2 MiB buffer
 * over and over (a large block: every one takes the pool's lock) and times each pair; it does the same for as long
 * again with no reads. The longest
 * pairs during the reads, beside those without, say how long a read kept the pool's lock from others: a read that holds
 * the lock for its whole walk shows as one pair over a millisecond per read at least; the pairs without reads show the
 * machine's own pauses (a loaded machine deschedules the probe for milliseconds now and then, reads or not). Prints one
 * line; exit status 0, 2 for a wrong command line.
 */
public final class BigPoolRead {

    private static final long PROBE_BYTES = 2L << 20;
    private static final String SNAPSHOT_READ_EVENT = "dev.compute.memory.SnapshotRead";

    private BigPoolRead() {}

    /** A block as the endpoint describes it ({@code BlockDescriptor}): made here too, since that is part of the answer. */
    private record BlockView(long offset, long sizeBytes, long requestedBytes, MemorySnapshot.BlockState state, String site) {}

    public static int run(String[] args) {
        return run(args, System.out, System.err);
    }

    /** The value of option {@code args[i - 1]}: a count of 1 or more (an empty pool or no reads has no figures). */
    private static int count(String[] args, int i) {
        try {
            int count = Integer.parseInt(args[i]);
            if (count > 0) {
                return count;
            }
        } catch (NumberFormatException | ArrayIndexOutOfBoundsException e) {
            // said below
        }
        throw new IllegalArgumentException(args[i - 1] + " needs a count of 1 or more" + (i < args.length ? ", not " + args[i] : ""));
    }

    static int run(String[] args, PrintStream out, PrintStream err) {
        int live = 100_000;
        int reads = 20;
        try {
            for (int i = 0; i < args.length; i++) {
                switch (args[i]) {
                    case "--live" -> live = count(args, ++i);
                    case "--reads" -> reads = count(args, ++i);
                    default -> throw new IllegalArgumentException("unknown argument: " + args[i]);
                }
            }
        } catch (RuntimeException e) {
            err.println("big-pool-read: " + e.getMessage());
            err.println("usage: big-pool-read [--live N] [--reads R]");
            return 2;
        }
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend("cpu").build()) {
            List<UnifiedBuffer> kept = fill(manager, live);
            int blocks = 0;
            for (int i = 0; i < reads; i++) {
                blocks = read(manager); // untimed: compiled before the timed reads
            }
            long[] readNanos = new long[reads];
            Path recordingFile = Files.createTempFile("big-pool-read", ".jfr");
            try (Recording recording = new Recording()) {
                recording.enable(SNAPSHOT_READ_EVENT);
                recording.start();
                for (int i = 0; i < reads; i++) {
                    long start = System.nanoTime();
                    read(manager);
                    readNanos[i] = System.nanoTime() - start;
                }
                recording.stop();
                recording.dump(recordingFile);
            }
            List<RecordedEvent> readEvents = RecordingFile.readAllEvents(recordingFile).stream()
                    .filter(e -> e.getEventType().getName().equals(SNAPSHOT_READ_EVENT)).toList();
            Files.delete(recordingFile);
            long[] probedNanos = new long[reads];
            Probe during = Probe.start(manager);
            long readsStart = System.nanoTime();
            for (int i = 0; i < reads; i++) {
                long start = System.nanoTime();
                read(manager);
                probedNanos[i] = System.nanoTime() - start;
            }
            long readsTook = System.nanoTime() - readsStart;
            long[] withReads = during.stop();
            Probe idle = Probe.start(manager);
            sleep(readsTook);
            long[] withoutReads = idle.stop();
            Arrays.sort(readNanos);
            Arrays.sort(probedNanos);
            long[] longestHolds = readEvents.stream().mapToLong(e -> e.getDuration("longestHold").toNanos()).sorted().toArray();
            String holds = readEvents.isEmpty() ? "longest_hold_us_median=n/a longest_hold_us_max=n/a holds_per_read=n/a" : String.format(Locale.ROOT,
                    "longest_hold_us_median=%.0f longest_hold_us_max=%.0f holds_per_read=%d", longestHolds[longestHolds.length / 2] / 1e3,
                    longestHolds[longestHolds.length - 1] / 1e3, readEvents.stream().mapToInt(e -> e.getInt("holds")).max().orElseThrow());
            out.printf(Locale.ROOT, "big-pool-read live_blocks=%d blocks_in_view=%d reads=%d read_ms_median=%.1f read_ms_max=%.1f %s"
                            + " read_ms_median_with_probe=%.1f probe_pairs_during_reads=%d probe_over_1ms_during_reads=%d"
                            + " probe_p999_us_during_reads=%.0f probe_max_us_during_reads=%.0f"
                            + " probe_pairs_without=%d probe_over_1ms_without=%d probe_p999_us_without=%.0f probe_max_us_without=%.0f%n",
                    live, blocks, reads, readNanos[reads / 2] / 1e6, readNanos[reads - 1] / 1e6, holds, probedNanos[reads / 2] / 1e6,
                    withReads.length, over(withReads, 1_000_000), percentile(withReads, 0.999) / 1e3, max(withReads) / 1e3,
                    withoutReads.length, over(withoutReads, 1_000_000), percentile(withoutReads, 0.999) / 1e3, max(withoutReads) / 1e3);
            kept.forEach(UnifiedBuffer::close);
        } catch (IOException e) {
            throw new UncheckedIOException("the JFR recording of the reads", e);
        }
        return 0;
    }

    private static List<UnifiedBuffer> fill(UnifiedMemoryManager manager, int live) {
        SplittableRandom random = new SplittableRandom(29);
        List<UnifiedBuffer> all = new ArrayList<>(2 * live);
        for (int i = 0; i < 2 * live; i++) {
            all.add(manager.allocate((long) Math.exp(Math.log(512) + random.nextDouble() * Math.log(32)), MemoryLocation.HOST));
        }
        List<UnifiedBuffer> kept = new ArrayList<>(live);
        for (int i = 0; i < all.size(); i++) {
            if (i % 2 == 0) {
                kept.add(all.get(i));
            } else {
                all.get(i).close();
            }
        }
        return kept;
    }

    /** One read as the endpoint makes it: the snapshot, then a descriptor per block. Returns the blocks. */
    private static int read(UnifiedMemoryManager manager) {
        MemorySnapshot snapshot = manager.snapshot(MemoryLocation.HOST);
        int blocks = 0;
        for (MemorySnapshot.Segment segment : snapshot.segments()) {
            List<BlockView> views = segment.blocks().stream().map(b -> new BlockView(b.offset(), b.sizeBytes(), b.requestedBytes(), b.state(),
                    b.allocationSite() == null ? "" : b.allocationSite())).toList();
            blocks += views.size();
        }
        return blocks;
    }

    /** A thread that allocates and closes a large buffer over and over, timing each pair. */
    private static final class Probe {
        private final AtomicBoolean stop = new AtomicBoolean();
        private final long[][] result = new long[1][];
        private final Thread thread;

        private Probe(UnifiedMemoryManager manager) {
            thread = Thread.ofPlatform().name("big-pool-read probe").start(() -> {
                long[] pairs = new long[1 << 16];
                int n = 0;
                while (!stop.get()) {
                    long start = System.nanoTime();
                    manager.allocate(PROBE_BYTES, MemoryLocation.HOST).close();
                    long took = System.nanoTime() - start;
                    if (n == pairs.length) {
                        pairs = Arrays.copyOf(pairs, 2 * n);
                    }
                    pairs[n++] = took;
                }
                result[0] = Arrays.copyOf(pairs, n);
            });
        }

        static Probe start(UnifiedMemoryManager manager) {
            return new Probe(manager);
        }

        long[] stop() {
            stop.set(true);
            try {
                thread.join();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted waiting for the probe", e);
            }
            return result[0];
        }
    }

    private static void sleep(long nanos) {
        try {
            Thread.sleep(nanos / 1_000_000, (int) (nanos % 1_000_000));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private static long over(long[] values, long nanos) {
        return Arrays.stream(values).filter(v -> v > nanos).count();
    }

    private static long max(long[] values) {
        return Arrays.stream(values).max().orElse(0);
    }

    private static long percentile(long[] values, double p) {
        if (values.length == 0) {
            return 0;
        }
        long[] sorted = values.clone();
        Arrays.sort(sorted);
        return sorted[Math.min(sorted.length - 1, (int) Math.ceil(p * sorted.length) - 1)];
    }
}
