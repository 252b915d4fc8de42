package dev.compute.benchmarks;

import dev.compute.benchmarks.compaction.CompactionBenchmark;
import dev.compute.benchmarks.gpu.GpuBenchmark;
import dev.compute.benchmarks.jmh.BufferHeapCost;
import dev.compute.benchmarks.jmh.JmhMain;
import dev.compute.benchmarks.jmh.JmhRatioTable;
import dev.compute.benchmarks.replay.ClimbCommand;
import dev.compute.benchmarks.replay.ReplayCommand;
import dev.compute.benchmarks.replay.TraceScaling;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.ToIntFunction;

/**
 * {@code java -jar compute-benchmarks.jar <subcommand> [arguments]}. A benchmark adds itself with one line in
 * {@link #SUBCOMMANDS}: its name and a function from its arguments to an exit status.
 */
public final class Benchmarks {

    private static final Map<String, ToIntFunction<String[]>> SUBCOMMANDS = new LinkedHashMap<>();

    static {
        SUBCOMMANDS.put("replay", ReplayCommand::run);
        SUBCOMMANDS.put("scale-trace", TraceScaling::run);
        SUBCOMMANDS.put("climb", ClimbCommand::run);
        SUBCOMMANDS.put("jmh", JmhMain::run);
        SUBCOMMANDS.put("jmh-table", JmhRatioTable::run);
        SUBCOMMANDS.put("heap-cost", BufferHeapCost::run);
        SUBCOMMANDS.put("gpu", GpuBenchmark::run);
        SUBCOMMANDS.put("compaction", CompactionBenchmark::run);
        SUBCOMMANDS.put("big-pool-read", BigPoolRead::run);
        SUBCOMMANDS.put("pinned-waste", PinnedWaste::run);
        SUBCOMMANDS.put("reservation-churn", ReservationChurn::run);
        SUBCOMMANDS.put("budget-pair-cpu", BudgetPairCpuTime::run);
    }

    private Benchmarks() {}

    public static void main(String[] args) {
        ToIntFunction<String[]> command = args.length == 0 ? null : SUBCOMMANDS.get(args[0]);
        if (command == null) {
            System.err.println("usage: java -jar compute-benchmarks.jar <" + String.join("|", SUBCOMMANDS.keySet()) + "> [arguments]");
            System.exit(2);
        }
        System.exit(command.applyAsInt(Arrays.copyOfRange(args, 1, args.length)));
    }
}
