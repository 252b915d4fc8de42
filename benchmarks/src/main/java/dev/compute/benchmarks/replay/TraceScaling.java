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
import java.nio.file.StandardCopyOption;
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
        try {
            // written beside OUT and moved onto it once whole: a trace that fails half-way leaves no half a trace
            // behind to be replayed as if it were whole, and IN may be OUT
            Path written = Files.createTempFile(out.toAbsolutePath().getParent(), out.getFileName() + ".", ".part");
            try {
                try (InputStream source = open(in); OutputStream target = create(written, out.toString().endsWith(".gz"))) {
                    scale(in.getFileName().toString(), source, factor, target);
                }
                Files.move(written, out, StandardCopyOption.REPLACE_EXISTING);
            } finally {
                Files.deleteIfExists(written);
            }
            return 0;
        } catch (IllegalArgumentException e) {
            err.println("scale-trace failed: " + e.getMessage());
            return 1;
        } catch (IOException e) {
            err.println("scale-trace failed: " + (e instanceof Trace.Unreadable ? e.getMessage() : e));
            return 1;
        }
    }

    /**
     * Copies the trace {@code name} from {@code in} to {@code out} with every allocation's bytes times {@code factor},
     * rounded down and at least 1; frees and every other column as they were, comments left out. Each line is read as
     * the replayer reads it, and a line it would refuse is refused here, naming the line.
     */
    public static void scale(String name, InputStream in, double factor, OutputStream out) throws IOException {
        BufferedReader reader = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8));
        Writer writer = new OutputStreamWriter(out, StandardCharsets.UTF_8);
        writer.write("# " + name + " with every allocation's bytes times " + factor + " (rounded down, at least 1)\n");
        Trace.Parser events = new Trace.Parser(name, false);
        int lineNumber = 0;
        for (String line; (line = readLine(reader, name, lineNumber + 1)) != null; ) {
            lineNumber++;
            line = line.strip();
            if (line.isEmpty() || line.startsWith("#")) {
                continue;
            }
            events.event(lineNumber, line);
            if (line.startsWith("a,")) {
                String[] fields = line.split(",", 4);
                long bytes = Long.parseLong(fields[2]);
                double scaled = bytes * factor;
                if (scaled >= 0x1p63) {
                    throw new IllegalArgumentException(name + " line " + lineNumber + " (" + line + "): " + bytes + " bytes times " + factor
                            + " is more than a trace can hold (" + Long.MAX_VALUE + " bytes)");
                }
                writer.write("a," + fields[1] + "," + Math.max(1, (long) scaled) + "," + fields[3] + "\n");
            } else {
                writer.write(line + "\n");
            }
        }
        writer.flush();
    }

    /** The next line; a failure to read it (a gzip stream cut short, say) names the trace and the line. */
    private static String readLine(BufferedReader reader, String name, int lineNumber) throws IOException {
        try {
            return reader.readLine();
        } catch (IOException e) {
            throw new IOException(name + " line " + lineNumber + " cannot be read: " + e, e);
        }
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
        InputStream in = Trace.open(file);
        if (!file.toString().endsWith(".gz")) {
            return in;
        }
        try {
            return new GZIPInputStream(in);
        } catch (IOException e) {
            in.close();
            throw new Trace.Unreadable(file + " cannot be read: " + e.getMessage(), e);
        }
    }

    private static OutputStream create(Path file, boolean gzip) throws IOException {
        OutputStream out = Files.newOutputStream(file);
        return gzip ? new GZIPOutputStream(out) : out;
    }
}
