package dev.compute.benchmarks.replay;

import dev.compute.memory.testing.AddressSpaceBackend;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;

/**
 * {@code climb FROM_MIB TO_MIB}: what the slack of growth costs on the simplest trace there is, one climb. Allocations
 * of 1 to 16 MiB (log-uniform, seeded) are made one after another; each prefix of that climb whose live bytes lie
 * between FROM and TO MiB is a trace of its own (its allocations, then their frees), replayed through the pool with
 * default settings and through {@link PyTorchExpandableSegments}. Every prefix's live peak is its last allocation, so
 * its overhead is what the last mapping reserved beyond it. Printed per doubling of the live bytes: the worst
 * overhead, how many prefixes are over {@link #GOAL}, and the backend calls of the window's first and last prefix.
 *
 * <p>Why a window: an online policy cannot tell the last allocation of a climb from the others. A prefix that ends with
 * the allocation that made mapping call k has overhead at least h(k) / (h(k−1) + s), h the bytes mapped after a call
 * and s the allocation, and over a doubling the ratios h(k) / h(k−1) multiply to 2; so a policy that keeps every
 * prefix of a doubling at or under 1 + g makes at least ln 2 / ln(1 + g) calls in it (36 for 1.02, where s is small
 * beside h), whatever it does otherwise. The last line prints that bound. Exit status: 0 printed; 2 a wrong command
 * line.
 */
public final class ClimbCommand {

    static final String USAGE = "usage: climb FROM_MIB TO_MIB   (whole MiB, 16 <= FROM < TO <= 65536)";

    /** The overhead the trace goal asks for at most. */
    static final double GOAL = 1.02;

    private static final long MiB = 1L << 20;
    private static final long SEED = 42;

    private ClimbCommand() {}

    /** One doubling's figures: ours and PyTorch's model, over the prefixes whose live bytes lie in {@code [fromBytes, toBytes)}. */
    record Window(long fromBytes, long toBytes, int prefixes, double worst, int overGoal, long firstCalls, long lastCalls,
                  double pytorchWorst, int pytorchOverGoal, long pytorchFirstCalls, long pytorchLastCalls) {

        String line() {
            return String.format(Locale.ROOT, "climb window_mib=%d..%d prefixes=%d worst=%.3f over_%.2f=%d calls=%d..%d"
                            + " pytorch_worst=%.3f pytorch_over_%.2f=%d pytorch_calls=%d..%d",
                    fromBytes / MiB, toBytes / MiB, prefixes, worst, GOAL, overGoal, firstCalls, lastCalls, pytorchWorst, GOAL,
                    pytorchOverGoal, pytorchFirstCalls, pytorchLastCalls);
        }
    }

    public static int run(String[] args) {
        return run(args, System.out, System.err);
    }

    static int run(String[] args, PrintStream out, PrintStream err) {
        long from;
        long to;
        try {
            if (args.length != 2) {
                throw new IllegalArgumentException("expected FROM_MIB TO_MIB, got " + args.length + " argument(s)");
            }
            from = mebibytes(args[0]);
            to = mebibytes(args[1]);
            if (from < 16 || to <= from || to > 65536) {
                throw new IllegalArgumentException("need 16 <= FROM < TO <= 65536, got " + from + " and " + to);
            }
        } catch (IllegalArgumentException e) {
            err.println("climb: " + e.getMessage());
            err.println(USAGE);
            return 2;
        }
        for (Window window : windows(from * MiB, to * MiB)) {
            out.println(window.line());
        }
        out.printf(Locale.ROOT, "bound: every prefix of a doubling at or under %.2f takes at least %d backend calls within it, whatever the policy%n",
                GOAL, callsPerDoubling(GOAL));
        return 0;
    }

    /** The fewest mapping calls within one doubling that keep every prefix in it at or under {@code goal}. */
    static int callsPerDoubling(double goal) {
        return (int) Math.ceil(Math.log(2) / Math.log(goal));
    }

    /** The climb's figures per doubling from {@code fromBytes}, the last window cut at {@code toBytes}. */
    static List<Window> windows(long fromBytes, long toBytes) {
        long[] sizes = climb(toBytes);
        TraceReplayer replayer = new TraceReplayer(AddressSpaceBackend::new, true, ReplaySettings.defaults());
        List<Window> windows = new ArrayList<>();
        WindowFigures window = null;
        long live = 0;
        for (int n = 1; n <= sizes.length; n++) {
            live += sizes[n - 1];
            if (live < fromBytes || live >= toBytes) {
                continue;
            }
            if (window == null || live >= window.toBytes) {
                if (window != null) {
                    windows.add(window.build());
                }
                long start = window == null ? fromBytes : window.toBytes;
                window = new WindowFigures(start, Math.min(2 * start, toBytes));
            }
            Trace prefix = prefix(sizes, n);
            TraceReplayer.Run ours = replayer.replay(prefix, 2 * toBytes);
            PyTorchExpandableSegments.Figures pytorch = PyTorchExpandableSegments.replay(prefix);
            window.add((double) ours.reservedPeak() / prefix.livePeak(), ours.backendCalls(),
                    (double) pytorch.reservedPeak() / prefix.livePeak(), pytorch.mapCalls());
        }
        if (window != null) {
            windows.add(window.build());
        }
        return windows;
    }

    /** The figures of one window as its prefixes are replayed. */
    private static final class WindowFigures {
        final long fromBytes;
        final long toBytes;
        int prefixes;
        double worst;
        int overGoal;
        long firstCalls = -1;
        long lastCalls;
        double pytorchWorst;
        int pytorchOverGoal;
        long pytorchFirstCalls = -1;
        long pytorchLastCalls;

        WindowFigures(long fromBytes, long toBytes) {
            this.fromBytes = fromBytes;
            this.toBytes = toBytes;
        }

        void add(double overhead, long calls, double pytorchOverhead, long pytorchCalls) {
            prefixes++;
            worst = Math.max(worst, overhead);
            overGoal += overhead > GOAL ? 1 : 0;
            firstCalls = firstCalls < 0 ? calls : firstCalls;
            lastCalls = calls;
            pytorchWorst = Math.max(pytorchWorst, pytorchOverhead);
            pytorchOverGoal += pytorchOverhead > GOAL ? 1 : 0;
            pytorchFirstCalls = pytorchFirstCalls < 0 ? pytorchCalls : pytorchFirstCalls;
            pytorchLastCalls = pytorchCalls;
        }

        Window build() {
            return new Window(fromBytes, toBytes, prefixes, worst, overGoal, firstCalls, lastCalls, pytorchWorst, pytorchOverGoal,
                    pytorchFirstCalls, pytorchLastCalls);
        }
    }

    /** Allocation sizes, 1 to 16 MiB log-uniform from a fixed seed, until they sum to at least {@code bytes}. */
    static long[] climb(long bytes) {
        SplittableRandom random = new SplittableRandom(SEED);
        List<Long> sizes = new ArrayList<>();
        for (long total = 0; total < bytes; ) {
            long size = (long) Math.exp(Math.log(MiB) + random.nextDouble() * Math.log(16));
            sizes.add(size);
            total += size;
        }
        return sizes.stream().mapToLong(Long::longValue).toArray();
    }

    /** The first {@code n} allocations of the climb, then their frees, as a trace. */
    static Trace prefix(long[] sizes, int n) {
        StringBuilder csv = new StringBuilder();
        for (int i = 0; i < n; i++) {
            csv.append("a,").append(i).append(',').append(sizes[i]).append(",0\n");
        }
        for (int i = 0; i < n; i++) {
            csv.append("f,").append(i).append('\n');
        }
        try {
            return Trace.read("climb of " + n, new ByteArrayInputStream(csv.toString().getBytes(StandardCharsets.UTF_8)));
        } catch (IOException e) {
            throw new UncheckedIOException(e); // a byte array does not fail
        }
    }

    private static long mebibytes(String text) {
        try {
            return Long.parseLong(text);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("not a whole number of MiB: " + text, e);
        }
    }
}
