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
 *
 * <p><b>Against PyTorch's calls: no policy has fewer without reserving more somewhere.</b> Each window also counts its
 * prefixes where our calls (maps and unmaps, counted as PyTorch's map calls are) are fewer than PyTorch's, and those
 * where we reserve more, and a line before the bound names the first prefix of each kind. Why the first of the second
 * kind never comes after the first of the first: on a climb of blocks no larger than its page P (20 MiB for large blocks,
 * 2 MiB for small ones), PyTorch fills its segment from the bottom and maps a page each time the live bytes L pass a
 * multiple of P, so after n allocations it reserves P·⌈L(n)/P⌉ with ⌈L(n)/P⌉ calls. Take any policy A. At the
 * allocation n(j) that takes L past (j−1)·P, A must reserve at least L(n(j)) > (j−1)·P; if A reserved no more than
 * PyTorch one allocation before, at most (j−1)·P, A's reserve grew, which takes a call. So a policy that reserves no
 * more than PyTorch at every prefix calls at every such allocation: at least as often as PyTorch, at every prefix. A
 * policy that makes fewer calls at some prefix reserves more than PyTorch at some prefix no later. No online policy
 * knows which prefix the trace stops at, so on climbs "no more calls and no more reserved than PyTorch" can only be met
 * by calling exactly when PyTorch does and mapping no further than its page: by PyTorch's own growth.
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
                  double pytorchWorst, int pytorchOverGoal, long pytorchFirstCalls, long pytorchLastCalls, int fewerCallsThanPyTorch,
                  int moreReservedThanPyTorch) {

        String line() {
            return String.format(Locale.ROOT, "climb window_mib=%d..%d prefixes=%d worst=%.3f over_%.2f=%d calls=%d..%d"
                            + " pytorch_worst=%.3f pytorch_over_%.2f=%d pytorch_calls=%d..%d fewer_calls_than_pytorch=%d"
                            + " more_reserved_than_pytorch=%d",
                    fromBytes / MiB, toBytes / MiB, prefixes, worst, GOAL, overGoal, firstCalls, lastCalls, pytorchWorst, GOAL,
                    pytorchOverGoal, pytorchFirstCalls, pytorchLastCalls, fewerCallsThanPyTorch, moreReservedThanPyTorch);
        }
    }

    /**
     * The windows of a climb, and the live bytes of its first prefix (from the window's start) where our calls are fewer
     * than PyTorch's and of its first where we reserve more (-1 where there is none).
     */
    record Climb(List<Window> windows, long firstFewerCallsAt, long firstMoreReservedAt) {

        String line() {
            return String.format(Locale.ROOT, "pytorch: fewer calls than PyTorch's first at %s, more reserved than PyTorch's first at %s;"
                            + " a policy with fewer calls than PyTorch's at some prefix of a climb reserves more at one no later, whatever the policy",
                    firstFewerCallsAt < 0 ? "no prefix" : firstFewerCallsAt / MiB + " MiB live",
                    firstMoreReservedAt < 0 ? "no prefix" : firstMoreReservedAt / MiB + " MiB live");
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
        Climb climb = climbFigures(from * MiB, to * MiB);
        for (Window window : climb.windows()) {
            out.println(window.line());
        }
        out.println(climb.line());
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
        return climbFigures(fromBytes, toBytes).windows();
    }

    /** The climb's figures per doubling, and where it first has fewer calls or more reserved than PyTorch's. */
    static Climb climbFigures(long fromBytes, long toBytes) {
        long[] sizes = climb(toBytes);
        TraceReplayer replayer = new TraceReplayer(AddressSpaceBackend::new, true, ReplaySettings.defaults());
        List<Window> windows = new ArrayList<>();
        WindowFigures window = null;
        long live = 0;
        long firstFewer = -1;
        long firstMore = -1;
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
                    (double) pytorch.reservedPeak() / prefix.livePeak(), pytorch.mapCalls(), ours.mapsAndUnmaps() < pytorch.mapCalls(),
                    ours.reservedPeak() > pytorch.reservedPeak());
            if (firstFewer < 0 && ours.mapsAndUnmaps() < pytorch.mapCalls()) {
                firstFewer = live;
            }
            if (firstMore < 0 && ours.reservedPeak() > pytorch.reservedPeak()) {
                firstMore = live;
            }
        }
        if (window != null) {
            windows.add(window.build());
        }
        return new Climb(windows, firstFewer, firstMore);
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
        int fewerCalls;
        int moreReserved;

        WindowFigures(long fromBytes, long toBytes) {
            this.fromBytes = fromBytes;
            this.toBytes = toBytes;
        }

        void add(double overhead, long calls, double pytorchOverhead, long pytorchCalls, boolean fewer, boolean more) {
            fewerCalls += fewer ? 1 : 0;
            moreReserved += more ? 1 : 0;
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
                    pytorchFirstCalls, pytorchLastCalls, fewerCalls, moreReserved);
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
