package dev.compute.benchmarks.replay;

import java.util.Comparator;
import java.util.Locale;
import java.util.Map;

/**
 * The figures of one trace (or of one location of it, where the trace names {@code location}s): live and reserved
 * peaks, the smallest capacity that fits the whole trace, the backend calls, scheduled trims and speed of the run at
 * the settings given; the frees the trace file had of ids that were not live (skipped); and the live peaks of each
 * stream and thread the trace names. Ratios are to the live peak (the sum of the sizes the trace names, before
 * rounding).
 */
public record ReplayResult(String trace, String location, int events, long livePeak, long reservedPeak, long minCapacity,
                           long backendCalls, long maps, long unmaps, double eventsPerSecond, int skippedFrees, long trims,
                           Map<String, Long> livePeakByStream, Map<String, Long> livePeakByThread) {

    /** How many streams and threads the table lists, those of most live bytes first. */
    static final int LISTED = 10;

    public double overhead() {
        return (double) reservedPeak / livePeak;
    }

    public double capacityRatio() {
        return (double) minCapacity / livePeak;
    }

    /** The one line per trace (and location) that scripts read. */
    public String line() {
        return String.format(Locale.ROOT, "replay trace=%s%s events=%d live_peak=%d reserved_peak=%d overhead=%.3f min_capacity=%d"
                        + " capacity_ratio=%.3f backend_calls=%d maps=%d unmaps=%d ops_per_s=%d skipped_frees=%d trims=%d",
                trace, location.isEmpty() ? "" : " location=" + location, events, livePeak, reservedPeak, overhead(), minCapacity,
                capacityRatio(), backendCalls, maps, unmaps, Math.round(eventsPerSecond), skippedFrees, trims);
    }

    /** The same figures for people, with what each means, then the live peaks by stream and by thread. */
    public String table() {
        StringBuilder table = new StringBuilder(String.format(Locale.ROOT, """
                  %-16s %,18d   allocations and frees replayed
                  %-16s %,18d   bytes live at the peak (%.3f GB)
                  %-16s %,18d   bytes the pool held at its peak, at these settings (%.3f GB)
                  %-16s %18.3f   reserved peak / live peak
                  %-16s %,18d   smallest device capacity in which the whole trace replays (%.3f GB)
                  %-16s %18.3f   min capacity / live peak
                  %-16s %,18d   segment allocations and frees, range reservations, page maps and unmaps
                  %-16s %,18d   of which segment allocations and page maps (what PyTorch's map calls count)
                  %-16s %,18d   of which segment frees and page unmaps
                  %-16s %,18d   events replayed per second, at these settings
                  %-16s %,18d   frees in the file of ids not live (blocks allocated before the recording started), skipped
                  %-16s %,18d   scheduled trims, each time the trace's time passed a trim interval
                """,
                "events", events, "live peak", livePeak, livePeak / 1e9, "reserved peak", reservedPeak, reservedPeak / 1e9,
                "overhead", overhead(), "min capacity", minCapacity, minCapacity / 1e9, "capacity ratio", capacityRatio(),
                "backend calls", backendCalls, "maps", maps, "unmaps", unmaps, "ops/s", Math.round(eventsPerSecond), "skipped frees", skippedFrees, "trims", trims));
        peaks(table, "stream", livePeakByStream);
        peaks(table, "thread", livePeakByThread);
        return table.toString();
    }

    private static void peaks(StringBuilder table, String column, Map<String, Long> peaks) {
        if (peaks.isEmpty() || (peaks.size() == 1 && peaks.containsKey(""))) {
            return;
        }
        table.append(String.format(Locale.ROOT, "  live peak by %s, %d in all%s (the most bytes each had allocated and not yet freed):%n",
                column, peaks.size(), peaks.size() > LISTED ? ", the " + LISTED + " of most bytes shown" : ""));
        peaks.entrySet().stream().sorted(Map.Entry.<String, Long>comparingByValue(Comparator.reverseOrder())).limit(LISTED)
                .forEach(peak -> table.append(String.format(Locale.ROOT, "    %-30s %,18d%n",
                        peak.getKey().isEmpty() ? "(not named)" : peak.getKey(), peak.getValue())));
    }
}
