package dev.compute.benchmarks;

import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.MemoryBudget;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.Locale;
import org.jspecify.annotations.Nullable;

/**
 * {@code budget-pair-cpu PAIRS ROUNDS}: the allocate+free pair of 4 KiB HOST on the CPU backend, pooled, leak detection
 * disabled, through the manager, a budget made by it ({@code budget}) and a budget under that one ({@code child}), in
 * one JVM. Each round times {@code PAIRS} pairs of each in turn by the thread's CPU time, not the clock, so that other
 * work on a loaded machine moves the figures far less than it moves JMH's; the first round warms up and is dropped,
 * and each figure is the best of the rest. Each buffer is stored before its close, as {@code BudgetAllocateFree}'s
 * {@code stored} does. Prints one line (ns per pair and the ratios to the manager's pair); exit status 0, 2 for a
 * wrong command line. Run it in several JVMs: a JVM's JIT decisions move all three figures by a few percent.
 */
public final class BudgetPairCpuTime {

    private static final long BUFFER_BYTES = 4096;
    private static final String[] THROUGH = {"manager", "budget", "child"};

    /** Where each pair stores its buffer before closing it, so that the JIT keeps every path's buffer on the heap. */
    @SuppressWarnings("unused") // written only: the store is the point
    private static volatile @Nullable UnifiedBuffer kept;

    private BudgetPairCpuTime() {}

    /** Best ns per pair through the manager, one budget and two, over the rounds after the first. */
    record Figures(double manager, double budget, double child) {}

    public static int run(String[] args) {
        return run(args, System.out, System.err);
    }

    static int run(String[] args, PrintStream out, PrintStream err) {
        if (args.length != 2 || !args[0].matches("[1-9][0-9]{0,8}") || !args[1].matches("[2-9]|[1-9][0-9]")) {
            err.println("budget-pair-cpu: takes the pairs a round (1 to 999999999) and the rounds (2 to 99; the first warms up)");
            return 2;
        }
        Figures figures = measure(Integer.parseInt(args[0]), Integer.parseInt(args[1]));
        out.printf(Locale.ROOT, "budget-pair-cpu manager=%.1f budget=%.1f child=%.1f budget/manager=%.3f child/manager=%.3f%n",
                figures.manager(), figures.budget(), figures.child(), figures.budget() / figures.manager(), figures.child() / figures.manager());
        return 0;
    }

    static Figures measure(int pairs, int rounds) {
        ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend("cpu").leakDetection(LeakDetectionLevel.DISABLED).build()) {
            MemoryBudget budget = manager.budget("tenant", 1L << 30);
            MemoryBudget child = manager.budget("parent", 1L << 30).child("request", 1L << 30);
            MemoryBudget[] through = {null, budget, child};
            double[] best = {Double.MAX_VALUE, Double.MAX_VALUE, Double.MAX_VALUE};
            for (int round = 0; round < rounds; round++) {
                for (int t = 0; t < THROUGH.length; t++) {
                    long start = threads.getCurrentThreadCpuTime();
                    pairs(manager, through[t], pairs);
                    double nsPerPair = (threads.getCurrentThreadCpuTime() - start) / (double) pairs;
                    if (round > 0) {
                        best[t] = Math.min(best[t], nsPerPair);
                    }
                }
            }
            return new Figures(best[0], best[1], best[2]);
        }
    }

    private static void pairs(UnifiedMemoryManager manager, @Nullable MemoryBudget budget, int pairs) {
        for (int i = 0; i < pairs; i++) {
            UnifiedBuffer buffer = budget == null ? manager.allocate(BUFFER_BYTES, MemoryLocation.HOST) : budget.allocate(BUFFER_BYTES, MemoryLocation.HOST);
            kept = buffer;
            buffer.close();
        }
    }
}
