package dev.compute.benchmarks.compaction;

import dev.compute.memory.BackendUnavailableException;
import dev.compute.memory.CompactionReport;
import dev.compute.memory.DataType;
import dev.compute.memory.InvalidSettingException;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemorySnapshot;
import dev.compute.memory.MemoryStatistics;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Random;

/**
 * What compaction gives back on a fragmented pool, against a trim alone, in one run: a manager allocates {@code n}
 * buffers of 1.5 to 24 MiB (log-uniform), writes each whole, and closes three in four at random, as a service whose
 * long-lived buffers outlast a burst would. Then one manager only trims (everything cached), its twin (same seed)
 * compacts and trims, a third trims first and compacts after (what a compaction finds after a scheduled trim); with
 * expandable ranges and with plain segments. Every buffer kept is read back and checked
 * after, so a figure is never bought with lost data.
 *
 * <p>Usage: {@code java -jar benchmarks/target/compute-benchmarks.jar compaction [--buffers N] [--seed S]
 * [--backend cpu]}. Prints a Markdown table; exits 1 when a kept buffer lost its data.
 */
public final class CompactionBenchmark {

    private static final long MiB = 1L << 20;
    private static final MemoryLocation LOCATION = MemoryLocation.DEVICE;

    /** What is done to the fragmented pool. */
    enum Operation {
        TRIM("trim"), COMPACT("compact + trim"), TRIM_THEN_COMPACT("trim, then compact + trim");

        final String label;

        Operation(String label) {
            this.label = label;
        }
    }

    private CompactionBenchmark() {}

    /** One line of the table. */
    record Row(String layout, String operation, MemoryStatistics before, MemoryStatistics after, long buffersMoved, long bytesMoved,
               Duration took, boolean dataKept) {}

    static final String USAGE = "usage: compaction [--buffers N] [--seed S] [--backend NAME]";

    private static String value(String[] args, int i) {
        if (i >= args.length) {
            throw new IllegalArgumentException(args[i - 1] + " needs a value");
        }
        return args[i];
    }

    public static void main(String[] args) {
        System.exit(run(args));
    }

    /** The {@code compaction} subcommand. */
    public static int run(String[] args) {
        int buffers = 200;
        long seed = 1;
        String backend = "cpu";
        try {
            for (int i = 0; i < args.length; i++) {
                switch (args[i]) {
                    case "--buffers" -> buffers = Integer.parseInt(value(args, ++i));
                    case "--seed" -> seed = Long.parseLong(value(args, ++i));
                    case "--backend" -> backend = value(args, ++i);
                    default -> throw new IllegalArgumentException("unknown: " + args[i]);
                }
            }
            if (buffers < 1) {
                throw new IllegalArgumentException("--buffers needs 1 or more, not " + buffers);
            }
        } catch (IllegalArgumentException e) { // NumberFormatException too
            System.err.println(USAGE + "; " + e.getMessage());
            return 2;
        }
        List<Row> rows = new ArrayList<>();
        try {
            for (boolean expandable : new boolean[] {true, false}) {
                for (Operation operation : Operation.values()) {
                    rows.add(measure(backend, expandable, operation, buffers, seed));
                }
            }
        } catch (InvalidSettingException e) { // a backend name the manager does not know
            System.err.println(USAGE + "; " + e.getMessage());
            return 2;
        } catch (BackendUnavailableException e) {
            System.err.println("compaction: " + e.getMessage());
            return 1;
        }
        System.out.printf(Locale.ROOT, "%d buffers of 1.5 to 24 MiB written whole, 3 in 4 closed at random (seed %d), %s backend, %s%n%n",
                buffers, seed, backend, LOCATION);
        System.out.println("| layout | operation | live | reserved before | reserved after | after / live | largest free before → after"
                + " | fragmentation before → after | buffers moved | bytes moved | time | data kept |");
        System.out.println("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |");
        boolean allKept = true;
        for (Row row : rows) {
            System.out.printf(Locale.ROOT, "| %s | %s | %s | %s | %s | %.3f | %s → %s | %.3f → %.3f | %d | %s | %.1f ms | %s |%n",
                    row.layout(), row.operation(), mib(row.after().allocatedBytes()), mib(row.before().reservedBytes()),
                    mib(row.after().reservedBytes()), (double) row.after().reservedBytes() / row.after().allocatedBytes(),
                    mib(row.before().largestFreeBlockBytes()), mib(row.after().largestFreeBlockBytes()), row.before().fragmentation(),
                    row.after().fragmentation(), row.buffersMoved(), mib(row.bytesMoved()), row.took().toNanos() / 1e6,
                    row.dataKept() ? "yes" : "NO");
            allKept &= row.dataKept();
        }
        return allKept ? 0 : 1;
    }

    private static String mib(long bytes) {
        return String.format(Locale.ROOT, "%.1f MiB", bytes / (double) MiB);
    }

    static Row measure(String backend, boolean expandable, Operation operation, int count, long seed) {
        Random random = new Random(seed);
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend(backend).expandableSegments(expandable)
                .releaseThreshold(0).maxPoolSize(16L << 30).trimInterval(Duration.ZERO).timelineInterval(Duration.ZERO).build()) {
            List<UnifiedBuffer> all = new ArrayList<>();
            List<Integer> seeds = new ArrayList<>();
            for (int i = 0; i < count; i++) {
                long bytes = (long) (1.5 * MiB * Math.pow(16, random.nextDouble())) & -8L;
                UnifiedBuffer buffer = manager.allocate(DataType.INT64, bytes / 8, LOCATION);
                buffer.copyFrom(content((int) (bytes / 8), i));
                all.add(buffer);
                seeds.add(i);
            }
            List<Integer> order = new ArrayList<>(seeds);
            Collections.shuffle(order, random);
            List<UnifiedBuffer> kept = new ArrayList<>();
            List<Integer> keptSeeds = new ArrayList<>();
            for (int i = 0; i < order.size(); i++) {
                int index = order.get(i);
                if (i % 4 == 0) {
                    kept.add(all.get(index));
                    keptSeeds.add(index);
                } else {
                    all.get(index).close();
                }
            }
            MemoryStatistics before = manager.statistics(LOCATION);
            // what the pool does, not what was asked: a backend that maps no pages gets plain segments either way
            boolean ranges = manager.snapshot(LOCATION).segments().stream().anyMatch(MemorySnapshot.Segment::expandable);
            long start = System.nanoTime();
            long moved = 0;
            long bytesMoved = 0;
            if (operation != Operation.COMPACT) {
                manager.trim();
            }
            if (operation != Operation.TRIM) {
                CompactionReport report = manager.compact(LOCATION);
                moved = report.buffersMoved();
                bytesMoved = report.bytesMoved();
            }
            Duration took = Duration.ofNanos(System.nanoTime() - start);
            MemoryStatistics after = manager.statistics(LOCATION);
            boolean dataKept = true;
            for (int i = 0; i < kept.size(); i++) {
                UnifiedBuffer buffer = kept.get(i);
                long[] read = new long[(int) buffer.elementCount()];
                buffer.copyTo(read);
                dataKept &= Arrays.equals(read, content(read.length, keptSeeds.get(i)));
                buffer.close();
            }
            return new Row(ranges ? "expandable ranges" : expandable ? "plain segments (the backend maps no pages)" : "plain segments", operation.label, before, after,
                    moved, bytesMoved, took, dataKept);
        }
    }

    private static long[] content(int longs, int seed) {
        long[] values = new long[longs];
        for (int i = 0; i < longs; i++) {
            values[i] = (long) seed << 32 | i;
        }
        return values;
    }
}
