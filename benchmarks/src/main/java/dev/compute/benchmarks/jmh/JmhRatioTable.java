package dev.compute.benchmarks.jmh;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Turns the CSV that {@code JmhMain -rf csv -rff FILE} writes for {@link ManagerAllocateFree} and
 * {@link PeerAllocateFree} into the tables of {@code docs/benchmarks-log.md}: nanoseconds per allocate+free pair for
 * every allocator and shape, each as a ratio against the raw backend ({@code backend}) and against Netty's pooled
 * allocator of the same run, then the goals with met or NOT met: issue 6's (at most 100 ns a same-size pair, faster
 * than Netty's pooled allocator) and, where the run has it, issue 13's (faster than Netty's adaptive allocator).
 *
 * <p>Usage: {@code java -jar benchmarks/target/compute-benchmarks.jar jmh-table FILE.csv}
 */
public final class JmhRatioTable {

    static final double PAIR_GOAL_NANOS = 100;
    static final String[] SHAPES = {"sameSize", "mixedSizes", "sameSizeTwoThreads", "mixedSizesTwoThreads"};
    static final String RAW = "raw backend (CpuBackend allocate/free)";
    static final String NETTY_POOLED = "Netty PooledByteBufAllocator, direct";
    static final String NETTY_ADAPTIVE = "Netty AdaptiveByteBufAllocator, direct";

    private JmhRatioTable() {}

    public static void main(String[] args) {
        System.exit(run(args));
    }

    /** The {@code jmh-table} subcommand. */
    public static int run(String[] args) {
        return run(args, System.out, System.err);
    }

    static int run(String[] args, PrintStream out, PrintStream err) {
        if (args.length != 1) {
            err.println("usage: jmh-table FILE.csv   (the output of: jmh -rf csv -rff FILE.csv)");
            return 2;
        }
        List<String> csv;
        try {
            csv = Files.readAllLines(Path.of(args[0]));
        } catch (IOException e) {
            err.println("jmh-table: cannot read " + args[0] + ": " + e);
            return 1;
        }
        try {
            out.print(render(csv));
            return 0;
        } catch (IllegalArgumentException e) {
            err.println("jmh-table: " + args[0] + ": " + e.getMessage());
            return 1;
        }
    }

    /** A JMH score: the mean and its 99.9% error half-width (NaN when JMH had too few samples for one). */
    record Score(double nanos, double error) {}

    /** allocator name → shape → nanoseconds per pair. */
    static Map<String, Map<String, Score>> scores(List<String> csv) {
        // a file that is not JMH's CSV of these benchmarks fails saying why, not with an index out of bounds
        if (csv.isEmpty() || csv.getFirst().isBlank()) {
            throw new IllegalArgumentException("empty, not the CSV of: jmh -rf csv -rff FILE.csv");
        }
        List<String> header = fields(csv.getFirst());
        int benchmark = column(header, "Benchmark");
        int score = column(header, "Score");
        int error = column(header, "Score Error (99.9%)");
        int unit = column(header, "Unit");
        int allocator = header.indexOf("Param: allocator");
        int pooling = header.indexOf("Param: pooling");
        int leaks = header.indexOf("Param: leakDetection");
        int recording = header.indexOf("Param: recording");
        Map<String, Map<String, Score>> scores = new LinkedHashMap<>();
        for (int line = 2; line <= csv.size(); line++) {
            if (csv.get(line - 1).isBlank()) {
                continue;
            }
            List<String> row = fields(csv.get(line - 1));
            if (row.size() != header.size()) {
                throw new IllegalArgumentException("line " + line + " has " + row.size() + " fields, the header " + header.size());
            }
            String name = row.get(benchmark);
            if (name.contains(":") || !row.get(unit).equals("ns/op")) {
                continue; // secondary results of a profiler (gc.alloc.rate.norm and the like)
            }
            String className = name.substring(0, Math.max(0, name.lastIndexOf('.')));
            if (!className.endsWith("ManagerAllocateFree") && !className.endsWith("PeerAllocateFree")) {
                continue; // another benchmark of the suite (BufferLifetimeCost): not an allocate+free pair
            }
            String shape = name.substring(name.lastIndexOf('.') + 1);
            String label = className.endsWith("ManagerAllocateFree")
                    ? "manager, " + (param(row, pooling, "pooling").equals("pooled") ? "pooled" : "pooling disabled") + ", leak detection "
                            + param(row, leaks, "leakDetection") + recordingLabel(row, recording)
                    : peerName(param(row, allocator, "allocator"));
            scores.computeIfAbsent(label, k -> new LinkedHashMap<>()).put(shape,
                    new Score(number(row.get(score), line), number(row.get(error), line)));
        }
        if (scores.isEmpty()) {
            throw new IllegalArgumentException("no allocate+free pairs in ns/op (ManagerAllocateFree or PeerAllocateFree, run"
                    + " without -tu and -bm)");
        }
        return scores;
    }

    /**
     * How the manager's recording was set, where not the default ({@code idle}): a run of {@code -p recording=off,idle,active}
     * has a result per setting, each a row of its own rather than one written over the others.
     */
    private static String recordingLabel(List<String> row, int recording) {
        return recording < 0 || row.get(recording).isEmpty() || row.get(recording).equals("idle") ? "" : ", recording " + row.get(recording);
    }

    private static int column(List<String> header, String name) {
        int index = header.indexOf(name);
        if (index < 0) {
            throw new IllegalArgumentException("no column " + name + ", not the CSV of: jmh -rf csv -rff FILE.csv");
        }
        return index;
    }

    /** A benchmark's parameter, which JMH writes as a column of its own where the run has the benchmark. */
    private static String param(List<String> row, int index, String name) {
        if (index < 0) {
            throw new IllegalArgumentException("no column Param: " + name + ", which JMH writes for the benchmark's rows");
        }
        return row.get(index);
    }

    private static double number(String field, int line) {
        try {
            return field.isBlank() || field.equals("NaN") ? Double.NaN : Double.parseDouble(field);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("line " + line + ": the score '" + field + "' is not a number");
        }
    }

    static String peerName(String allocator) {
        return switch (allocator) {
            case "backend" -> RAW;
            case "backend-resource" -> "BackendResource (unpooled resource)";
            case "pool-resource" -> "CachingPoolResource alone (no leak tracking, no statistics)";
            case "netty-pooled" -> NETTY_POOLED;
            case "netty-adaptive" -> NETTY_ADAPTIVE;
            case "arena-confined" -> "Arena.ofConfined().allocate + close";
            case "allocate-direct" -> "ByteBuffer.allocateDirect (freed by GC)";
            default -> allocator;
        };
    }

    static String render(List<String> csv) {
        Map<String, Map<String, Score>> scores = scores(csv);
        StringBuilder out = new StringBuilder();
        out.append("| allocator | same size, 1 thread | mixed sizes, 1 thread | same size, 2 threads | mixed sizes, 2 threads |\n");
        out.append("| --- | ---: | ---: | ---: | ---: |\n");
        Map<String, Score> raw = scores.getOrDefault(RAW, Map.of());
        Map<String, Score> netty = scores.getOrDefault(NETTY_POOLED, Map.of());
        Map<String, Score> adaptive = scores.getOrDefault(NETTY_ADAPTIVE, Map.of());
        scores.forEach((label, byShape) -> {
            out.append("| ").append(label);
            for (String shape : SHAPES) {
                Score pair = byShape.get(shape);
                out.append(" | ").append(pair == null ? "–" : String.format(Locale.ROOT, "%.1f ± %.1f ns (%s raw, %s Netty)",
                        pair.nanos(), pair.error(), ratio(pair.nanos(), raw.get(shape)), ratio(pair.nanos(), netty.get(shape))));
            }
            out.append(" |\n");
        });
        out.append("\nMean ± JMH's 99.9% error; ratios: time per pair divided by the raw backend's and by Netty's pooled allocator's"
                + " time for the same shape in this run (below 1 is faster).\n\n");
        for (Map.Entry<String, Map<String, Score>> entry : scores.entrySet()) {
            if (!entry.getKey().startsWith("manager, pooled")) {
                continue;
            }
            Score same = entry.getValue().get("sameSize");
            if (same != null) {
                out.append(String.format(Locale.ROOT, "- goal: at most %.0f ns per same-size pair, %s: %.1f ns, %s%n",
                        PAIR_GOAL_NANOS, entry.getKey(), same.nanos(), same.nanos() <= PAIR_GOAL_NANOS ? "met" : "NOT met"));
            }
            fasterThan("Netty's pooled allocator", netty, entry, out);
            fasterThan("Netty's adaptive allocator", adaptive, entry, out);
        }
        return out.toString();
    }

    /** The goal lines "faster than {@code peer}" of one manager row, one per shape both have. */
    private static void fasterThan(String peer, Map<String, Score> theirs, Map.Entry<String, Map<String, Score>> ours, StringBuilder out) {
        for (String shape : SHAPES) {
            Score mine = ours.getValue().get(shape);
            Score other = theirs.get(shape);
            if (mine != null && other != null) {
                out.append(String.format(Locale.ROOT, "- goal: faster than %s, %s, %s: %.1f vs %.1f ns (%.2f×), %s%n", peer,
                        ours.getKey(), shape, mine.nanos(), other.nanos(), mine.nanos() / other.nanos(),
                        mine.nanos() < other.nanos() ? "met" : "NOT met"));
            }
        }
    }

    private static String ratio(double nanos, Score base) {
        return base == null ? "–" : String.format(Locale.ROOT, "%.2f×", nanos / base.nanos());
    }

    /** One CSV line as JMH writes it: fields in double quotes where they hold commas or quotes. */
    static List<String> fields(String line) {
        List<String> fields = new ArrayList<>();
        StringBuilder field = new StringBuilder();
        boolean quoted = false;
        for (int i = 0; i < line.length(); i++) {
            char c = line.charAt(i);
            if (quoted) {
                if (c == '"' && i + 1 < line.length() && line.charAt(i + 1) == '"') {
                    field.append('"');
                    i++;
                } else if (c == '"') {
                    quoted = false;
                } else {
                    field.append(c);
                }
            } else if (c == '"') {
                quoted = true;
            } else if (c == ',') {
                fields.add(field.toString());
                field.setLength(0);
            } else {
                field.append(c);
            }
        }
        fields.add(field.toString());
        return fields;
    }
}
