package dev.compute.benchmarks.replay;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.OutputStreamWriter;
import java.io.PrintStream;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.zip.GZIPInputStream;
import java.util.zip.GZIPOutputStream;

/**
 * {@code scale-trace IN FACTOR OUT}: writes a trace whose allocations are those of {@code IN} with every size
 * multiplied by {@code FACTOR} (rounded down, at least one byte), in the same order, with the same ids, lifetimes and
 * other columns: the same program on a smaller or larger model. The input's comments are left out (they describe
 * the recorded run), and one comment says where the trace came from. Either file is gzip'd when its name ends in
 * {@code .gz}. Exit status: 0 written; 1 the input could not be read or written out; 2 a wrong command line.
 */
public final class TraceScaling {

    static final String USAGE = "usage: scale-trace IN FACTOR OUT   (FACTOR a positive number, e.g. 0.2; .gz names are gzip'd)";

    private TraceScaling() {}

    public static int run(String[] args) {
        return run(args, System.err);
    }

    static int run(String[] args, PrintStream err) {
        double factor;
        try {
            if (args.length != 3) {
                throw new IllegalArgumentException("expected IN FACTOR OUT, got " + args.length + " argument(s)");
            }
            factor = factor(args[1]);
        } catch (IllegalArgumentException e) {
            err.println("scale-trace: " + e.getMessage());
            err.println(USAGE);
            return 2;
        }
        Path in = Path.of(args[0]);
        Path out = Path.of(args[2]);
        try (InputStream source = open(in); OutputStream target = create(out)) {
            scale(in.getFileName().toString(), source, factor, target);
            return 0;
        } catch (IOException | IllegalArgumentException e) {
            err.println("scale-trace failed: " + e);
            return 1;
        }
    }

    /**
     * Copies the trace {@code name} from {@code in} to {@code out} with every allocation's bytes times {@code factor},
     * rounded down and at least 1; frees and every other column as they were, comments left out.
     */
    public static void scale(String name, InputStream in, double factor, OutputStream out) throws IOException {
        BufferedReader reader = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8));
        Writer writer = new OutputStreamWriter(out, StandardCharsets.UTF_8);
        writer.write("# " + name + " with every allocation's bytes times " + factor + " (rounded down, at least 1)\n");
        int lineNumber = 0;
        for (String line; (line = reader.readLine()) != null; ) {
            lineNumber++;
            if (line.isBlank() || line.startsWith("#")) {
                continue;
            }
            if (line.startsWith("a,")) {
                String[] fields = line.split(",", 4);
                if (fields.length < 4) {
                    throw new IllegalArgumentException(name + " line " + lineNumber + " (" + line + "): an allocation is a,<id>,<bytes>,<stream>...");
                }
                long bytes;
                try {
                    bytes = Long.parseLong(fields[2].strip());
                } catch (NumberFormatException e) {
                    throw new IllegalArgumentException(name + " line " + lineNumber + " (" + line + "): bytes must be a number", e);
                }
                writer.write("a," + fields[1] + "," + Math.max(1, (long) (bytes * factor)) + "," + fields[3] + "\n");
            } else {
                writer.write(line + "\n");
            }
        }
        writer.flush();
    }

    private static double factor(String text) {
        double factor;
        try {
            factor = Double.parseDouble(text);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("FACTOR must be a number: " + text, e);
        }
        if (!(factor > 0) || Double.isInfinite(factor)) {
            throw new IllegalArgumentException("FACTOR must be a positive number: " + text);
        }
        return factor;
    }

    private static InputStream open(Path file) throws IOException {
        InputStream in = Files.newInputStream(file);
        return file.toString().endsWith(".gz") ? new GZIPInputStream(in) : in;
    }

    private static OutputStream create(Path file) throws IOException {
        OutputStream out = Files.newOutputStream(file);
        return file.toString().endsWith(".gz") ? new GZIPOutputStream(out) : out;
    }
}
